package cpu

import (
	"context"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestPerKernelObjectsLinked builds two parallel kernels as separate objects against the
// shared C runtime (docs/ARCHITECTURE.md, "The pipeline", phase 7: one object per
// kernel, linked into one shared object with the runtime), loads the result once and
// runs both kernels.
func TestPerKernelObjectsLinked(t *testing.T) {
	const m, n, k = 20, 40, 30
	g := intrin.GemmF32("generic", 4, 4, 2)
	a := te.Placeholder("a", tensor.Float32, loopir.Int(m), loopir.Int(k))
	b := te.Placeholder("b", tensor.Float32, loopir.Int(k), loopir.Int(n))
	mm, err := te.Lower("linked_mm", []*te.Tensor{a, b}, []*te.Tensor{MatMulPacked(a, b, 0, g.NR)})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(mm)
	if err := ScheduleMatMulPacked(s, g, GemmConfig{KC: 16, MC: 2, Parallel: true}); err != nil {
		t.Fatal(err)
	}
	x := te.Placeholder("x", tensor.Float32, loopir.Int(m*n))
	y := te.Compute("y", []loopir.Expr{loopir.Int(m * n)}, func(i []loopir.Expr) loopir.Expr {
		return te.Add(x.At(i[0]), x.At(i[0]))
	})
	add, err := te.Lower("linked_double", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	s2 := schedule.New(add)
	blk, _ := s2.GetBlock("y")
	l, _ := s2.GetLoops(blk)
	parts, _ := s2.Split(l[0], []int64{-1, 64})
	if err := s2.Parallel(parts[0]); err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if err != nil {
		testdata.NoCompiler(t, err)
	}
	defer dev.Close()
	ctx := context.Background()
	rt, err := dev.Compiler().CompileObject(ctx, codegen.CRuntime())
	if err != nil {
		t.Fatal(err)
	}
	objs := [][]byte{rt}
	var names []string
	for _, f := range []*loopir.PrimFunc{s.Func(), s2.Func()} {
		low, err := passes.CPUPipeline().Run(f)
		if err != nil {
			t.Fatal(err)
		}
		src, err := codegen.EmitCWith(codegen.COptions{ExternRuntime: true}, low)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := dev.Compiler().CompileObject(ctx, src.Code)
		if err != nil {
			t.Fatal(err)
		}
		objs, names = append(objs, obj), append(names, src.Kernels[0])
	}
	so, err := dev.Compiler().Link(ctx, objs)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(so)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	kmm, err := mod.Kernel(names[0])
	if err != nil {
		t.Fatal(err)
	}
	kadd, err := mod.Kernel(names[1])
	if err != nil {
		t.Fatal(err)
	}
	av, bv := kerneltest.Random(71, m*k), kerneltest.Random(72, k*n)
	got, err := kerneltest.Launch(dev, kmm, nil, m*n, av, bv)
	if err != nil {
		t.Fatal(err)
	}
	kerneltest.Close(t, "linked matmul", got, kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
		tensor.MustFromSlice(tensor.Shape{m, k}, av), tensor.MustFromSlice(tensor.Shape{k, n}, bv)}))
	doubled, err := kerneltest.Launch(dev, kadd, nil, m*n, got)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, m*n)
	for i, v := range got {
		want[i] = 2 * v
	}
	kerneltest.Close(t, "linked add", doubled, tensor.MustFromSlice(tensor.Shape{m * n}, want))
}
