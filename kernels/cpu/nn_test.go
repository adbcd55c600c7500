package cpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The generic definitions of MatMul, Gemm, Conv and ConvTranspose, compiled through the
// generic strategy and compared with the reference evaluator. Extents are deliberately
// not powers of two; each op is exercised both with reductions small enough to be
// written out (spatial blocks) and large enough to stay reduction loops.

// TestNNMatMul covers numpy matmul: vectors, batches and broadcasting of batch axes.
func TestNNMatMul(t *testing.T) {
	cases := []struct{ a, b []int }{
		{[]int{7, 45}, []int{45, 13}},            // plain, reduction loop
		{[]int{7, 5}, []int{5, 13}},              // small K: written-out sum
		{[]int{45}, []int{45, 13}},               // vector · matrix
		{[]int{7, 45}, []int{45}},                // matrix · vector
		{[]int{45}, []int{45}},                   // dot product
		{[]int{3, 9}, []int{2, 4, 9, 5}},         // vector against a batch
		{[]int{2, 3, 9, 11}, []int{2, 3, 11, 9}}, // [b,h,s,d]×[b,h,d,s]
		{[]int{2, 3, 40}, []int{40, 33}},         // [b,s,k]×[k,n]
		{[]int{2, 1, 3, 4}, []int{5, 4, 6}},      // batch broadcast both ways
		{[]int{1, 3, 37}, []int{4, 37, 6}},       // batch broadcast of a
		{[]int{4, 6, 37}, []int{1, 37, 3}},       // batch broadcast of b
		{[]int{2, 3, 1}, []int{2, 1, 7}},         // K = 1: outer products
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%v×%v", c.a, c.b), func(t *testing.T) {
			nnCheck(t, graph.OpMatMul, nil, nt.In(f32(uint64(10+i), c.a...)), nt.In(f32(uint64(50+i), c.b...)))
		})
	}
	t.Run("constant weight", func(t *testing.T) {
		nnCheck(t, graph.OpMatMul, nil, nt.In(f32(3, 2, 5, 64)), nt.C(f32(4, 64, 19)))
	})
	t.Run("int32", func(t *testing.T) {
		a := tensor.FromFloat64s(tensor.Int32, tensor.Shape{4, 35}, nnInts(35*4, 7))
		b := tensor.FromFloat64s(tensor.Int32, tensor.Shape{35, 6}, nnInts(35*6, 5))
		nnCheck(t, graph.OpMatMul, nil, nt.In(a), nt.In(b))
	})
}

// nnInts returns n small integers (a repeating pattern in [-r, r]).
func nnInts(n, r int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64((i*7+3)%(2*r+1) - r)
	}
	return v
}

// TestNNGemm covers every transpose combination, alpha and beta, and every shape of C.
func TestNNGemm(t *testing.T) {
	const m, n = 7, 11
	for _, ta := range []int64{0, 1} {
		k := 37 + 3*int(ta) // a prime k (plain reduction), then one in chunks
		for _, tb := range []int64{0, 1} {
			as, bs := []int{m, k}, []int{k, n}
			if ta != 0 {
				as = []int{k, m}
			}
			if tb != 0 {
				bs = []int{n, k}
			}
			for ci, cs := range [][]int{nil, {n}, {1, n}, {m, 1}, {m, n}, {}, {1, 1}} {
				at := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
				at.TransA, at.TransB = ta, tb
				if ci%2 == 1 {
					at.Alpha, at.Beta = 0.5, -1.5
				}
				name := fmt.Sprintf("tA=%d tB=%d C=%v alpha=%v beta=%v", ta, tb, cs, at.Alpha, at.Beta)
				t.Run(name, func(t *testing.T) {
					c := nt.None
					if cs != nil {
						c = nt.In(f32(uint64(ci), cs...))
					}
					nnCheck(t, graph.OpGemm, at, nt.In(f32(1, as...)), nt.C(f32(2, bs...)), c)
				})
			}
		}
	}
	t.Run("small K, beta 0", func(t *testing.T) {
		at := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
		at.Beta = 0
		nnCheck(t, graph.OpGemm, at, nt.In(f32(1, 5, 3)), nt.In(f32(2, 3, 9)), nt.In(f32(3, 5, 9)))
	})
}

// nnGeneric is a CPU strategy table with only the generic rule: the definitions of
// this package's nn ops are checked even where a tensorized strategy would take over.
func nnGeneric() *kernels.Strategies {
	reg := kernels.Default()
	return kernels.NewStrategies(kernels.Strategy{Name: "generic", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
		return kernels.Generic(reg, kernels.KernelName(n), n, in, ScheduleGeneric)
	}}, nil)
}

// nnCheck compares a node with the reference twice: lowered by the generic rule alone,
// and by the CPU strategy table (a tensorized strategy where one applies).
func nnCheck(t *testing.T, op graph.Op, attrs any, args ...nt.Arg) {
	t.Helper()
	if s := nt.CheckNode(t, nnGeneric(), op, attrs, 1, args...); s != "generic" {
		t.Fatalf("strategy %s, want generic", s)
	}
	nt.CheckNode(t, Strategies(kernels.Default()), op, attrs, 1, args...)
}

// nnLower lowers a one-node graph on parameters of element type dt and the given
// shapes with l.
func nnLower(t *testing.T, l *kernels.Strategies, op graph.Op, attrs any, dt tensor.DType, shapes ...[]int) (*kernels.Impl, error) {
	t.Helper()
	b := graph.NewBuilder("main")
	var vals []*graph.Value
	for i, s := range shapes {
		ext := make([]int64, len(s))
		for k, d := range s {
			ext[k] = int64(d)
		}
		vals = append(vals, b.Param(fmt.Sprintf("x%d", i), graph.TensorType(dt, graph.StaticShape(ext...)...)))
	}
	outs, err := b.Node(op, attrs, 1, vals...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	in, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	return l.Lower(n, in, target.Host())
}

// nnExpectNoKernel fails unless lowering the node reports ErrNoKernel.
func nnExpectNoKernel(t *testing.T, l *kernels.Strategies, op graph.Op, attrs any, dt tensor.DType, shapes ...[]int) {
	t.Helper()
	if _, err := nnLower(t, l, op, attrs, dt, shapes...); !errors.Is(err, kernels.ErrNoKernel) {
		t.Fatalf("%v: got %v, want ErrNoKernel", op, err)
	}
}

// TestNNVectorizes checks that the definitions give the generic rule a loop to
// vectorize: small contractions (a depthwise 3×3 window, a short k) written out as
// spatial blocks, larger ones as reductions over written-out chunks around which the
// rule moves the innermost output loop.
func TestNNVectorizes(t *testing.T) {
	l := nnGeneric()
	dw := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	dw.Group, dw.Pads = 16, []int64{1, 1, 1, 1}
	plain := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	plain.Pads = []int64{1, 1, 1, 1}
	ct := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
	ct.Strides, ct.Pads = []int64{2, 2}, []int64{1, 1, 1, 1}
	cases := []struct {
		name    string
		op      graph.Op
		attrs   any
		shapes  [][]int
		reduces bool
	}{
		{"depthwise 3x3", graph.OpConv, dw, [][]int{{1, 16, 30, 30}, {16, 1, 3, 3}, {16}}, false},
		{"1x1 over 40 channels", graph.OpConv, plain, [][]int{{1, 40, 30, 30}, {24, 40, 1, 1}}, true},
		{"3x3 over 32 channels", graph.OpConv, plain, [][]int{{1, 32, 30, 30}, {24, 32, 3, 3}}, true},
		{"transposed 4x4 stride 2", graph.OpConvTranspose, ct, [][]int{{1, 8, 14, 14}, {8, 4, 4, 4}}, true},
		{"matmul k=12", graph.OpMatMul, nil, [][]int{{64, 12}, {12, 200}}, false},
		{"matmul k=512", graph.OpMatMul, nil, [][]int{{64, 512}, {512, 200}}, true},
	}
	for _, c := range cases {
		impl, err := nnLower(t, l, c.op, c.attrs, tensor.Float32, c.shapes...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tr := impl.Trace.String()
		if !strings.Contains(tr, "vectorize(") {
			t.Errorf("%s: no vectorized loop; trace:\n%s", c.name, tr)
		}
		if got := strings.Contains(tr, "decompose_reduction("); got != c.reduces {
			t.Errorf("%s: reduction %v, want %v; trace:\n%s", c.name, got, c.reduces, tr)
		}
	}
}

// TestNNUnsupported checks that what the definitions do not cover is reported as
// ErrNoKernel rather than lowered wrongly.
func TestNNUnsupported(t *testing.T) {
	l := nnGeneric()
	gemm := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
	nnExpectNoKernel(t, l, graph.OpGemm, gemm, tensor.Float32, []int{5, 3}, []int{3, 9}, []int{5, 2})
	nnExpectNoKernel(t, l, graph.OpMatMul, nil, tensor.Float16, []int{5, 3}, []int{3, 9})
	conv := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	nnExpectNoKernel(t, l, graph.OpConv, conv, tensor.Float16, []int{1, 3, 9, 9}, []int{4, 3, 3, 3})
	ct := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
	ct.OutputShape = []int64{1, 2, 10, 10} // N and C included: the reference ignores it
	nnExpectNoKernel(t, l, graph.OpConvTranspose, ct, tensor.Float32, []int{1, 3, 5, 5}, []int{3, 2, 3, 3})
	ct.OutputShape, ct.Strides = []int64{14, 20}, []int64{2, 2} // odd total padding
	nnExpectNoKernel(t, l, graph.OpConvTranspose, ct, tensor.Float32, []int{1, 3, 7, 9}, []int{3, 2, 3, 3})
	gemmInt := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
	gemmInt.Alpha = 0.5
	nnExpectNoKernel(t, l, graph.OpGemm, gemmInt, tensor.Int32, []int{5, 3}, []int{3, 9})
}

// nnConvCase is one convolution under test.
type nnConvCase struct {
	name                               string
	x, w                               []int
	strides, pads, dilations, outShape []int64
	outPad                             []int64
	group                              int64
	autoPad                            string
	bias                               bool
}

func (c nnConvCase) args(seed uint64, m int) []nt.Arg {
	args := []nt.Arg{nt.In(f32(seed, c.x...)), nt.C(f32(seed+1, c.w...))}
	if c.bias {
		args = append(args, nt.C(f32(seed+2, m)))
	}
	return args
}

// TestNNConv covers 1-D, 2-D and 3-D convolutions: strides, dilations, asymmetric pads,
// every auto_pad, groups (one, several channels per group, depthwise), bias or none.
func TestNNConv(t *testing.T) {
	x2 := []int{1, 3, 17, 19}
	odd := []int64{1, 0, 2, 1}
	cases := []nnConvCase{
		{name: "g1", x: x2, w: []int{4, 3, 3, 3}, strides: []int64{2, 2}, pads: odd, dilations: []int64{2, 2}, group: 1},
		{name: "g1 bias", x: x2, w: []int{4, 3, 3, 3}, strides: []int64{2, 2}, pads: odd, dilations: []int64{2, 2}, group: 1, bias: true},
		{name: "g3 two per group", x: x2, w: []int{6, 1, 3, 3}, strides: []int64{2, 2}, pads: odd, dilations: []int64{2, 2}, group: 3, bias: true},
		{name: "depthwise", x: x2, w: []int{3, 1, 3, 3}, strides: []int64{2, 2}, pads: odd, dilations: []int64{2, 2}, group: 3},
		{name: "depthwise bias s1", x: x2, w: []int{3, 1, 3, 3}, pads: []int64{1, 1, 1, 1}, group: 3, bias: true},
		{name: "depthwise 5x5", x: []int{2, 5, 13, 11}, w: []int{5, 1, 5, 5}, pads: []int64{2, 1, 2, 3}, group: 5},
		{name: "depthwise 7x7", x: []int{1, 4, 15, 12}, w: []int{4, 1, 7, 7}, pads: []int64{3, 3, 3, 3}, strides: []int64{2, 1}, group: 4, bias: true},
		{name: "chunks g1", x: []int{2, 8, 17, 19}, w: []int{6, 8, 3, 3}, strides: []int64{2, 1}, pads: odd, group: 1, bias: true},
		{name: "chunks g2", x: []int{1, 8, 17, 19}, w: []int{6, 4, 3, 3}, strides: []int64{1, 2}, pads: odd, dilations: []int64{1, 2}, group: 2},
		{name: "1x1", x: []int{1, 40, 13, 11}, w: []int{24, 40, 1, 1}, group: 1, bias: true},
		{name: "1x1 s2", x: []int{2, 40, 13, 11}, w: []int{24, 40, 1, 1}, strides: []int64{2, 2}, group: 1},
		{name: "1x1 small", x: []int{1, 6, 13, 11}, w: []int{5, 6, 1, 1}, group: 1},
		{name: "1x1 chunks", x: []int{1, 150, 5, 7}, w: []int{9, 150, 1, 1}, group: 1, bias: true},
		{name: "1x1 prime", x: []int{1, 67, 5, 7}, w: []int{9, 67, 1, 1}, group: 1},
		{name: "depthwise 9x9 loop", x: []int{1, 3, 14, 12}, w: []int{3, 1, 9, 9}, pads: []int64{4, 3, 4, 5}, strides: []int64{1, 2}, group: 3},
		{name: "1x3 kernel chunks", x: []int{1, 6, 9, 14}, w: []int{5, 6, 1, 3}, pads: []int64{0, 1, 0, 1}, strides: []int64{1, 2}, group: 1},
		{name: "rect kernel", x: []int{1, 5, 12, 14}, w: []int{7, 5, 1, 5}, pads: []int64{0, 2, 0, 2}, group: 1},
		{name: "same upper", x: x2, w: []int{4, 3, 3, 3}, strides: []int64{2, 2}, autoPad: "SAME_UPPER", group: 1},
		{name: "same lower", x: x2, w: []int{4, 3, 4, 4}, strides: []int64{2, 3}, autoPad: "SAME_LOWER", group: 1},
		{name: "same lower chunks", x: []int{1, 9, 17, 19}, w: []int{4, 9, 4, 2}, strides: []int64{3, 2}, dilations: []int64{1, 2}, autoPad: "SAME_LOWER", group: 1, bias: true},
		{name: "valid", x: x2, w: []int{4, 3, 3, 3}, strides: []int64{2, 2}, autoPad: "VALID", group: 1},
		{name: "1-D", x: []int{2, 5, 23}, w: []int{4, 5, 3}, group: 1},
		{name: "1-D pads stride", x: []int{2, 5, 23}, w: []int{4, 5, 3}, strides: []int64{2}, pads: []int64{1, 2}, group: 1, bias: true},
		{name: "1-D chunks", x: []int{2, 30, 23}, w: []int{7, 30, 3}, strides: []int64{2}, pads: []int64{2, 0}, dilations: []int64{3}, group: 1, bias: true},
		{name: "1-D depthwise", x: []int{1, 6, 29}, w: []int{6, 1, 5}, pads: []int64{2, 2}, group: 6},
		{name: "3-D", x: []int{1, 2, 7, 8, 9}, w: []int{3, 2, 3, 3, 3}, pads: []int64{1, 1, 1, 1, 0, 1}, strides: []int64{1, 2, 2}, group: 1, bias: true},
		{name: "3-D chunks", x: []int{1, 4, 6, 7, 5}, w: []int{5, 4, 3, 3, 3}, pads: []int64{1, 0, 1, 1, 1, 0}, dilations: []int64{1, 2, 1}, group: 1},
		{name: "3-D 5x5x5 loop", x: []int{1, 2, 7, 8, 6}, w: []int{3, 2, 5, 5, 5}, pads: []int64{2, 2, 1, 2, 2, 3}, group: 1, bias: true},
		{name: "3-D small", x: []int{1, 2, 5, 6, 7}, w: []int{4, 1, 1, 3, 3}, pads: []int64{0, 1, 1, 0, 1, 1}, group: 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
			a.Strides, a.Pads, a.Dilations, a.Group = c.strides, c.pads, c.dilations, c.group
			if c.autoPad != "" {
				a.AutoPad = c.autoPad
			}
			nnCheck(t, graph.OpConv, a, c.args(uint64(100+10*i), c.w[0])...)
		})
	}
	t.Run("runtime weights", func(t *testing.T) {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.Pads = []int64{1, 1, 1, 1}
		nnCheck(t, graph.OpConv, a, nt.In(f32(1, 1, 4, 9, 10)), nt.In(f32(2, 5, 4, 3, 3)), nt.In(f32(3, 5)))
	})
}

// TestNNConvTranspose covers 1-D and 2-D transposed convolutions: strides (by phase),
// dilations with strides (divisibility guards), pads, output_padding, output_shape,
// auto_pad and groups.
func TestNNConvTranspose(t *testing.T) {
	x2 := []int{1, 3, 7, 9}
	cases := []nnConvCase{
		{name: "s1", x: x2, w: []int{3, 2, 3, 3}, group: 1},
		{name: "s2 pads outpad", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 2}, pads: []int64{1, 0, 1, 2}, outPad: []int64{1, 0}, group: 1, bias: true},
		{name: "s3x2 k4", x: []int{2, 8, 5, 6}, w: []int{8, 3, 4, 5}, strides: []int64{3, 2}, pads: []int64{1, 2, 0, 1}, group: 1},
		{name: "g3", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 2}, group: 3, bias: true},
		{name: "g2", x: []int{1, 8, 6, 5}, w: []int{8, 3, 3, 3}, strides: []int64{2, 1}, pads: []int64{1, 1, 1, 1}, group: 2},
		{name: "chunks", x: []int{1, 16, 5, 6}, w: []int{16, 3, 4, 5}, strides: []int64{3, 2}, pads: []int64{1, 2, 0, 1}, group: 1, bias: true},
		{name: "g2 chunks", x: []int{2, 24, 5, 4}, w: []int{24, 2, 3, 3}, strides: []int64{2, 2}, outPad: []int64{1, 1}, group: 2},
		{name: "9x9 loop", x: []int{1, 2, 5, 6}, w: []int{2, 3, 9, 9}, pads: []int64{2, 3, 4, 1}, group: 1},
		{name: "dilated strided chunks", x: []int{1, 12, 6, 5}, w: []int{12, 2, 3, 3}, strides: []int64{3, 2}, dilations: []int64{2, 3}, pads: []int64{0, 1, 2, 0}, group: 1},
		{name: "dilated strided", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 3}, dilations: []int64{2, 2}, pads: []int64{1, 2, 0, 1}, group: 1},
		{name: "dilated", x: x2, w: []int{3, 2, 3, 2}, dilations: []int64{2, 3}, group: 1, bias: true},
		{name: "same upper", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 2}, autoPad: "SAME_UPPER", group: 1},
		{name: "same lower", x: x2, w: []int{3, 2, 4, 3}, strides: []int64{2, 2}, autoPad: "SAME_LOWER", group: 1},
		{name: "output shape", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 2}, outShape: []int64{13, 19}, group: 1},
		{name: "output shape larger", x: x2, w: []int{3, 2, 3, 3}, strides: []int64{2, 2}, outShape: []int64{16, 21}, group: 1, bias: true},
		{name: "1-D", x: []int{2, 5, 11}, w: []int{5, 4, 3}, strides: []int64{2}, pads: []int64{1, 1}, outPad: []int64{1}, group: 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
			a.Strides, a.Pads, a.Dilations, a.Group = c.strides, c.pads, c.dilations, c.group
			a.OutputPadding, a.OutputShape = c.outPad, c.outShape
			if c.autoPad != "" {
				a.AutoPad = c.autoPad
			}
			nnCheck(t, graph.OpConvTranspose, a, c.args(uint64(300+10*i), c.w[1]*int(c.group))...)
		})
	}
}

// TestNNSymbolicBatch lowers the definitions with a symbolic batch extent (a runtime
// dim of the kernel) and runs them at batch 2 against the reference.
func TestNNSymbolicBatch(t *testing.T) {
	conv := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.Pads, conv.Strides = []int64{1, 0, 2, 1}, []int64{2, 1}
	ct := graph.OpConvTranspose.NewAttrs().(*graph.ConvTransposeAttrs)
	ct.Pads, ct.Strides = []int64{1, 1, 0, 1}, []int64{2, 2}
	cases := []struct {
		name   string
		op     graph.Op
		attrs  any
		shapes [][]int // the leading extent of the first input is the batch
		build  func(x, w, b *te.Tensor) (*te.Tensor, error)
	}{
		{"matmul", graph.OpMatMul, nil, [][]int{{2, 3, 7, 40}, {40, 9}}, func(x, w, _ *te.Tensor) (*te.Tensor, error) {
			return kernels.MatMulND(x, w)
		}},
		{"gemm", graph.OpGemm, graph.OpGemm.NewAttrs(), [][]int{{2, 19}, {19, 9}, {9}}, func(x, w, b *te.Tensor) (*te.Tensor, error) {
			return kernels.Gemm(x, w, b, false, false, 1, 1)
		}},
		{"conv", graph.OpConv, conv, [][]int{{2, 5, 11, 13}, {4, 5, 3, 3}, {4}}, func(x, w, b *te.Tensor) (*te.Tensor, error) {
			win, err := graph.ConvWindow(conv, []int64{3, 3})
			if err != nil {
				return nil, err
			}
			g, err := kernels.ResolveConv([]int64{11, 13}, win, 1)
			if err != nil {
				return nil, err
			}
			return kernels.Conv(x, w, b, g)
		}},
		{"conv transpose", graph.OpConvTranspose, ct, [][]int{{2, 4, 5, 6}, {4, 3, 3, 3}, {3}}, func(x, w, b *te.Tensor) (*te.Tensor, error) {
			win, err := graph.ConvTransposeWindow(ct, []int64{3, 3})
			if err != nil {
				return nil, err
			}
			g, err := kernels.ResolveConvTranspose([]int64{5, 6}, win, ct.Group)
			if err != nil {
				return nil, err
			}
			return kernels.ConvTranspose(x, w, b, g)
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ts []*tensor.Tensor
			var ps []*te.Tensor
			var data [][]float32
			for k, s := range c.shapes {
				v := f32(uint64(700+10*i+k), s...)
				ext := kernels.Static(nnInt64s(s)...)
				if k == 0 {
					ext[0] = te.Dim("n")
				}
				ts = append(ts, v)
				ps = append(ps, te.Placeholder(fmt.Sprintf("in%d", k), tensor.Float32, ext...))
				data = append(data, v.Data.([]float32))
			}
			var bias *te.Tensor
			if len(ps) > 2 {
				bias = ps[2]
			}
			out, err := c.build(ps[0], ps[1], bias)
			if err != nil {
				t.Fatal(err)
			}
			f, err := te.Lower("k", ps, []*te.Tensor{out})
			if err != nil {
				t.Fatal(err)
			}
			s := schedule.New(f)
			if err := ScheduleGeneric(s); err != nil {
				t.Fatal(err)
			}
			want := kt.Ref(t, c.op, c.attrs, ts)
			got := kt.Run(t, s.Func(), []int64{int64(c.shapes[0][0])}, want.Len(), data...)
			kt.Close(t, c.name, got, want)
		})
	}
}

func nnInt64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
