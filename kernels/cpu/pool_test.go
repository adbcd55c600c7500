package cpu

import (
	"context"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"

	"github.com/kilnrt/kiln/codegen"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestThreadPoolConcurrentLaunches runs a kernel with parallel loops from several
// goroutines at once (one of them owns the pool, the others run their chunks inline),
// then unloads the module (its workers must stop first) and loads it again.
func TestThreadPoolConcurrentLaunches(t *testing.T) {
	const m, n, k = 50, 96, 70
	g := intrin.GemmF32("generic", 4, 4, 2)
	a := te.Placeholder("a", tensor.Float32, loopir.Int(m), loopir.Int(k))
	b := te.Placeholder("b", tensor.Float32, loopir.Int(k), loopir.Int(n))
	c := MatMulPacked(a, b, g.MR, g.NR)
	f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(f)
	if err := ScheduleMatMulPacked(s, g, GemmConfig{KC: 32, MC: 2, Parallel: true}); err != nil {
		t.Fatal(err)
	}
	low, err := passes.CPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(low)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if err != nil {
		testdata.NoCompiler(t, err)
	}
	defer dev.Close()
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	av, bv := kerneltest.Random(11, m*k), kerneltest.Random(12, k*n)
	want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
		tensor.MustFromSlice(tensor.Shape{m, k}, av), tensor.MustFromSlice(tensor.Shape{k, n}, bv)})
	for round := 0; round < 2; round++ {
		mod, err := dev.Load(bin)
		if err != nil {
			t.Fatal(err)
		}
		kern, err := mod.Kernel(src.Kernels[0])
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := 0; it < 10; it++ {
					got, err := kerneltest.Launch(dev, kern, nil, m*n, av, bv)
					if err != nil {
						errs <- err
						return
					}
					kerneltest.Close(t, "concurrent matmul", got, want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
