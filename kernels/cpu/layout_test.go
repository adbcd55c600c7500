package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// blockedOperand is one input of a node run on blocked storage: its NCHW data (a run-
// time input, a constant or absent) and the block it is stored in (0: plain).
type blockedOperand struct {
	arg   nt.Arg
	block int
}

func bl(t *tensor.Tensor, block int) blockedOperand { return blockedOperand{nt.In(t), block} }

// runBlocked runs a one-output node whose inputs are stored as ops say and whose 4-D
// output is stored in blocks of b, and compares the unpacked output with the reference.
func runBlocked(t *testing.T, what string, op graph.Op, attrs any, b int, ops ...blockedOperand) {
	t.Helper()
	args := make([]nt.Arg, len(ops))
	for i, o := range ops {
		args[i] = o.arg
	}
	m, inputs := nt.Build(t, op, attrs, 1, args...)
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	for i, o := range ops {
		if o.block == 0 {
			continue
		}
		s := o.arg.T.Shape
		n.Inputs[i].Type.Block = int64(o.block)
		args[i] = nt.In(tensor.MustFromSlice(s, PackNCHWc(o.arg.T.Data.([]float32), s[0], s[1], s[2], s[3], o.block)))
	}
	n.Outputs[0].Type.Block = int64(b)
	got, _, err := nt.RunNode(Strategies(kernels.Default()), n, args)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	s := want.Shape
	kt.Close(t, what, UnpackNCHWc(got[0].Data.([]float32), s[0], s[1], s[2], s[3], b), want)
}

// TestBlockedBroadcastOperandsMatchReference: binary and variadic ops whose output is
// stored in channel blocks read operands that broadcast onto it (per channel plain or
// blocked, per image, per row, per column, one element) through the blocked index, as
// either operand, with batch 2 and blocks of 8 and 16.
func TestBlockedBroadcastOperandsMatchReference(t *testing.T) {
	const n, c, h, w = 2, 32, 5, 7
	for _, b := range []int{8, 16} {
		x := bl(f32(1, n, c, h, w), b)
		operands := map[string]blockedOperand{
			"[1,C,1,1] plain":   bl(f32(2, 1, c, 1, 1), 0),
			"[C,1,1] plain":     bl(f32(3, c, 1, 1), 0),
			"[1,C,1,1] blocked": bl(f32(4, 1, c, 1, 1), b),
			"[N,C,1,1] blocked": bl(f32(5, n, c, 1, 1), b),
			"[N,C,1,1] plain":   bl(f32(6, n, c, 1, 1), 0),
			"[N,1,H,W] plain":   bl(f32(7, n, 1, h, w), 0),
			"[H,1] plain":       bl(f32(8, h, 1), 0),
			"[W] plain":         bl(f32(9, w), 0),
			"[1] plain":         bl(f32(10, 1), 0),
			"[N,C,H,W] plain":   bl(f32(11, n, c, h, w), 0),
			"[1,C,H,W] blocked": bl(f32(12, 1, c, h, w), b),
		}
		for name, o := range operands {
			ops := []graph.Op{graph.OpMul}
			if o.arg.T.Shape[0] == 1 && o.arg.T.Shape.NumElements() == c {
				ops = append(ops, graph.OpAdd, graph.OpDiv, graph.OpPRelu) // the per-channel forms nets use
			}
			for _, op := range ops {
				runBlocked(t, fmt.Sprintf("%v(x, %s) in blocks of %d", op, name, b), op, nil, b, x, o)
			}
			if o.arg.T.Shape.NumElements() > 1 {
				runBlocked(t, fmt.Sprintf("Sub(%s, x) in blocks of %d", name, b), graph.OpSub, nil, b, o, x)
			}
			runBlocked(t, fmt.Sprintf("Max(%s, x, %s) in blocks of %d", name, name, b), graph.OpMax, nil, b, o, x, o)
		}
	}
}

// TestBlockedGlobalPoolWritesBlocks: a global pool over a blocked input writes its
// [N, C, 1, 1] result as the blocked storage [N, C/b, 1, 1, b] (the kernel's output
// has that shape) when its output is stored so, with the reference's values.
func TestBlockedGlobalPoolWritesBlocks(t *testing.T) {
	for _, op := range []graph.Op{graph.OpGlobalAveragePool, graph.OpGlobalMaxPool} {
		for _, b := range []int{8, 16} {
			what := fmt.Sprintf("%v in blocks of %d", op, b)
			runBlocked(t, what, op, nil, b, bl(f32(21, 2, 32, 6, 5), b))
			m, _ := nt.Build(t, op, nil, 1, nt.In(f32(21, 2, 32, 6, 5)))
			n := m.Main.Nodes[len(m.Main.Nodes)-1]
			n.Inputs[0].Type.Block, n.Outputs[0].Type.Block = int64(b), int64(b)
			in, err := nt.Placeholders(n)
			if err != nil {
				t.Fatal(err)
			}
			impl, err := Strategies(kernels.Default()).Lower(n, in, target.Host())
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if out := impl.Func.Params[len(impl.Params)]; len(out.Shape) != 5 {
				t.Errorf("%s: the kernel writes %v, not [N, C/b, 1, 1, b]", what, out.Shape)
			}
		}
	}
}

// TestLayoutPolicyAcceptsBroadcastOperands: the CPU's policy keeps an elementwise op
// blocked when its operands of the output's shape are blocked and the others
// broadcast onto it (a squeeze-and-excitation scale, plain or blocked); it refuses a
// plain operand of the output's shape (alter-layout brings it into the block), an
// operand that does not broadcast, and broadcasting for ops whose definitions do not
// broadcast numpy-style. A global pool keeps its input's block.
func TestLayoutPolicyAcceptsBroadcastOperands(t *testing.T) {
	policy := LayoutPolicy(target.Host(), kernels.Default())
	node := func(op graph.Op, attrs any, shapes ...[]int) *graph.Node {
		args := make([]nt.Arg, len(shapes))
		for i, s := range shapes {
			args[i] = nt.In(f32(uint64(i+1), s...))
		}
		m, _ := nt.Build(t, op, attrs, 1, args...)
		return m.Main.Nodes[len(m.Main.Nodes)-1]
	}
	x, scale := []int{2, 32, 5, 7}, []int{1, 32, 1, 1}
	for _, c := range []struct {
		what string
		n    *graph.Node
		in   []int64
		out  int64
		ok   bool
	}{
		{"Mul(x blocked, [1,C,1,1] plain)", node(graph.OpMul, nil, x, scale), []int64{16, 0}, 16, true},
		{"Mul([1,C,1,1] blocked, x blocked)", node(graph.OpMul, nil, scale, x), []int64{16, 16}, 16, true},
		{"Mul(x blocked, [C,1,1] plain)", node(graph.OpMul, nil, x, []int{32, 1, 1}), []int64{16, 0}, 16, true},
		{"Add(x blocked, x blocked)", node(graph.OpAdd, nil, x, x), []int64{16, 16}, 16, true},
		{"Add(x blocked, x plain)", node(graph.OpAdd, nil, x, x), []int64{16, 0}, 0, false},
		{"Mul(x plain, [1,C,1,1] blocked)", node(graph.OpMul, nil, x, scale), []int64{0, 16}, 0, false},
		{"Mul(x blocked in 16, [1,C,1,1] in 8)", node(graph.OpMul, nil, x, scale), []int64{16, 8}, 0, false},
		{"Sum(x blocked, [1,C,1,1] blocked, [2,1,1,1] plain)", node(graph.OpSum, nil, x, scale, []int{2, 1, 1, 1}), []int64{16, 16, 0}, 16, true},
		{"Mul(x blocked, [32] plain): broadcasts onto W, not C", node(graph.OpMul, nil, []int{2, 32, 5, 32}, []int{32}), []int64{16, 0}, 16, true},
		{"Mul(x blocked, [5,1] plain)", node(graph.OpMul, nil, x, []int{5, 1}), []int64{16, 0}, 16, true},
		{"Mul(x blocked, [1,C,1,1] plain) into [2,32,5,7]", node(graph.OpMul, nil, []int{2, 32, 5, 1}, []int{1, 32, 1, 7}), []int64{16, 0}, 0, false},
		{"GlobalAveragePool(x blocked)", node(graph.OpGlobalAveragePool, nil, x), []int64{16}, 16, true},
		{"GlobalAveragePool(x plain)", node(graph.OpGlobalAveragePool, nil, x), []int64{0}, 0, false},
	} {
		out, ok := policy.Accepts(c.n, c.in)
		if ok != c.ok || ok && out != c.out {
			t.Errorf("%s: Accepts = %d, %v; want %d, %v", c.what, out, ok, c.out, c.ok)
		}
	}
	gp := node(graph.OpGlobalAveragePool, nil, x)
	if !policy.PlainOutput(gp, []int64{16}) {
		t.Errorf("a global pool over blocked input cannot write plain")
	}
	if mul := node(graph.OpMul, nil, x, scale); policy.PlainOutput(mul, []int64{16, 0}) {
		t.Errorf("a blocked Mul claims a plain output")
	}
}

// TestBlockedResizeMatchesReference: Resize of H and W on blocked storage (nearest as
// the PP-OCR detector's FPN upsamples, nearest with the default rounding, linear), by
// constant scales or sizes, with batch 2, matches the reference unpacked; the policy
// takes it blocked, and refuses a Resize that scales the channels.
func TestBlockedResizeMatchesReference(t *testing.T) {
	mk := func(mode, coord, nearest string) *graph.ResizeAttrs {
		a := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
		a.Mode, a.CoordinateTransformationMode, a.NearestMode = mode, coord, nearest
		return a
	}
	scales := nt.C(tensor.MustFromSlice(tensor.Shape{4}, []float32{1, 1, 2, 2}))
	sizes := nt.C(tensor.MustFromSlice(tensor.Shape{4}, []int64{2, 32, 9, 4}))
	for _, b := range []int{8, 16} {
		for _, a := range []*graph.ResizeAttrs{mk("nearest", "asymmetric", "floor"), mk("nearest", "half_pixel", "round_prefer_floor"), mk("linear", "half_pixel", "round_prefer_floor")} {
			x := bl(f32(31, 2, 32, 5, 6), b)
			runBlocked(t, fmt.Sprintf("Resize %s %s by scales in blocks of %d", a.Mode, a.CoordinateTransformationMode, b), graph.OpResize, a, b, x, blockedOperand{nt.None, 0}, blockedOperand{scales, 0})
			runBlocked(t, fmt.Sprintf("Resize %s %s to sizes in blocks of %d", a.Mode, a.CoordinateTransformationMode, b), graph.OpResize, a, b, x, blockedOperand{nt.None, 0}, blockedOperand{nt.None, 0}, blockedOperand{sizes, 0})
		}
	}
	policy := LayoutPolicy(target.Host(), kernels.Default())
	a := mk("nearest", "asymmetric", "floor")
	m, _ := nt.Build(t, graph.OpResize, a, 1, nt.In(f32(31, 2, 32, 5, 6)), nt.None, scales)
	if out, ok := policy.Accepts(m.Main.Nodes[len(m.Main.Nodes)-1], []int64{16, 0, 0}); !ok || out != 16 {
		t.Errorf("Resize of H and W: Accepts = %d, %v; want 16, true", out, ok)
	}
	m, _ = nt.Build(t, graph.OpResize, a, 1, nt.In(f32(31, 2, 32, 5, 6)), nt.None, nt.C(tensor.MustFromSlice(tensor.Shape{4}, []float32{1, 2, 2, 2})))
	if _, ok := policy.Accepts(m.Main.Nodes[len(m.Main.Nodes)-1], []int64{16, 0, 0}); ok {
		t.Errorf("a Resize of the channels is accepted on blocked input")
	}
}

// TestBlockedPoolInCeilModeMatchesReference: MaxPool and AveragePool (count_include_pad
// 0) in ceil mode run on blocked storage, their last window reaching past the input and
// its end pad (SqueezeNet's 3×3 stride-2 pools on 111- and 55-wide maps keep its
// convolutions' outputs blocked): the layout policy accepts them, and the unpacked
// result matches the reference, with blocks of 8 and 16.
func TestBlockedPoolInCeilModeMatchesReference(t *testing.T) {
	reg := kernels.Default()
	for _, c := range []poolCase{
		{kernel: []int64{3, 3}, strides: []int64{2, 2}, ceil: 1},
		{kernel: []int64{3, 2}, strides: []int64{2, 3}, pads: []int64{1, 0, 0, 1}, ceil: 1},
	} {
		for _, op := range []graph.Op{graph.OpMaxPool, graph.OpAveragePool} {
			for _, b := range []int{8, 16} {
				a := poolAttrs(op, c)
				what := fmt.Sprintf("%v %+v in blocks of %d", op, c, b)
				m, _ := nt.Build(t, op, a, 1, nt.In(f32(61, 2, 32, 14, 15)))
				if blk, ok := accepts(reg, m.Main.Nodes[len(m.Main.Nodes)-1], []int64{int64(b)}); !ok || blk != int64(b) {
					t.Fatalf("%s: accepted %v in blocks of %d", what, ok, blk)
				}
				runBlocked(t, what, op, a, b, bl(f32(61, 2, 32, 14, 15), b))
			}
		}
	}
}
