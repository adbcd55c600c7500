package cpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/tensor"
)

// guardBytes is the sentinel tail every buffer of runGuarded carries past its end.
const guardBytes = 256

// runGuarded lowers op over args (run-time inputs) with the CPU strategies, builds the
// kernel (bounds-checked when checked), and runs it on buffers that each carry a
// sentinel tail of guardBytes; it fails the test if a tail changed (a write outside a
// buffer) and returns the kernel's error.
func runGuarded(t *testing.T, checked bool, op graph.Op, attrs any, args ...*tensor.Tensor) error {
	t.Helper()
	in := make([]nt.Arg, len(args))
	for i, a := range args {
		in[i] = nt.In(a)
	}
	m, _ := nt.Build(t, op, attrs, 1, in...)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	ph, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := Strategies(kernels.Default()).Lower(n, ph, hostTarget())
	if err != nil {
		t.Fatal(err)
	}
	low, err := passes.CPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitCWith(codegen.COptions{BoundsCheck: checked}, low)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	var contents [][]byte
	for _, p := range impl.Params {
		raw, err := args[p.Input].Raw()
		if err != nil {
			t.Fatal(err)
		}
		contents = append(contents, raw)
	}
	for _, p := range impl.Func.Params[len(impl.Params):] {
		size := int64(p.DT.Size())
		for _, e := range p.Shape {
			size *= e.(*loopir.IntImm).V
		}
		contents = append(contents, make([]byte, size))
	}
	sentinel := bytes.Repeat([]byte{0xA5}, guardBytes)
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, c := range contents {
		b, err := dev.Alloc(int64(len(c) + guardBytes))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if err := dev.CopyIn(b, append(append([]byte{}, c...), sentinel...)); err != nil {
			t.Fatal(err)
		}
	}
	kerr := dev.Launch(k, devices.Geometry{}, bufs, nil)
	for i, c := range contents {
		raw := make([]byte, len(c)+guardBytes)
		if err := dev.CopyOut(raw, bufs[i]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw[len(c):], sentinel) {
			t.Fatalf("%v: the kernel wrote past the end of buffer %d (%s)", op, i, impl.Func.Params[i].Name)
		}
	}
	return kerr
}

// TestHostileIndicesFailTheKernelAndWriteNothingOutside: an index outside [-n, n) in a
// scatter or a GatherND (one far past the end, one just past it, one below -n) makes
// the kernel report that index and n, in the plain and the bounds-checked build
// (which would report any access outside a buffer first), and no buffer is written past
// its end.
func TestHostileIndicesFailTheKernelAndWriteNothingOutside(t *testing.T) {
	data := f32(111, 4, 6)
	for _, bad := range []int64{1 << 40, 4, -5} {
		ind := i64s([]int{2, 1}, 1, bad)
		cases := []struct {
			op    graph.Op
			attrs any
			args  []*tensor.Tensor
		}{
			{graph.OpScatterElements, scatterElementsAttrs(0, "none"), []*tensor.Tensor{data, i64s([]int{2, 2}, 0, 1, bad, 3), f32(112, 2, 2)}},
			{graph.OpScatterElements, scatterElementsAttrs(0, "add"), []*tensor.Tensor{data, i64s([]int{2, 2}, 0, 1, bad, 3), f32(112, 2, 2)}},
			{graph.OpScatterND, scatterNDAttrs("none"), []*tensor.Tensor{data, ind, f32(113, 2, 6)}},
			{graph.OpScatterND, scatterNDAttrs("mul"), []*tensor.Tensor{data, ind, f32(113, 2, 6)}},
			{graph.OpGatherND, gatherNDAttrs(0), []*tensor.Tensor{data, ind}},
		}
		for _, c := range cases {
			for _, checked := range []bool{false, true} {
				what := fmt.Sprintf("%v index %d bounds-checked=%v", c.op, bad, checked)
				err := runGuarded(t, checked, c.op, c.attrs, c.args...)
				var ke *devices.KernelError
				if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange || ke.Detail != [2]int64{bad, 4} {
					t.Errorf("%s: got %v (%+v), want the index %d out of range for 4", what, err, ke, bad)
				}
			}
		}
	}
}
