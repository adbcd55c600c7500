package ref

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func op1(t *testing.T, b *graph.Builder, op graph.Op, attrs any, in ...*graph.Value) *graph.Value {
	t.Helper()
	v, err := b.Op1(op, attrs, in...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLoop runs a Loop that adds the iteration number to a carried value and emits it as
// a scan output: after M=4 iterations acc = 0+1+2+3 and the scan output stacks each step.
func TestLoop(t *testing.T) {
	b := graph.NewBuilder("main")
	m := b.Param("m", graph.TensorType(tensor.Int64))
	init := b.Const("init", tensor.Scalar(int64(0)))
	body := b.Sub("body")
	it := body.Param("i", graph.TensorType(tensor.Int64))
	cond := body.Param("cond", graph.TensorType(tensor.Bool))
	acc := body.Param("acc", graph.TensorType(tensor.Int64))
	next := op1(t, body, graph.OpAdd, nil, acc, it)
	same := op1(t, body, graph.OpIdentity, nil, cond)
	body.Return(same, next, next)
	outs, err := b.Node(graph.OpLoop, &graph.LoopAttrs{Body: body.F}, 2, m, nil, init)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Eval(mod, map[string]Value{"m": tensor.Scalar(int64(4))}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0].(*tensor.Tensor).Int64s()[0]; got != 6 {
		t.Errorf("final acc %d, want 6", got)
	}
	if got := res[1].(*tensor.Tensor); got.String() != "i64[4]{0, 1, 3, 6}" {
		t.Errorf("scan output %v", got)
	}
}

func TestEvalChecksInputs(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(2)))
	y := op1(t, b, graph.OpRelu, nil, x)
	mod, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]map[string]Value{
		"missing":     {},
		"wrong dtype": {"x": tensor.New(tensor.Float64, tensor.Shape{1, 2})},
		"wrong shape": {"x": tensor.New(tensor.Float32, tensor.Shape{1, 3})},
		"unknown":     {"x": tensor.New(tensor.Float32, tensor.Shape{1, 2}), "z": tensor.Scalar(1.0)},
	}
	for name, in := range cases {
		if _, err := Eval(mod, in, Options{}); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: got %v, want ErrBadInput", name, err)
		}
	}
	res, err := Eval(mod, map[string]Value{"x": tensor.MustFromSlice(tensor.Shape{3, 2}, []float32{-1, 2, -3, 4, 0, -0.5})}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0].(*tensor.Tensor).String(); got != "f32[3,2]{0, 2, 0, 4, 0, 0}" {
		t.Errorf("relu = %s", got)
	}
}

// directConv is the textbook 2-D convolution loop, the oracle for the im2col path.
func directConv(x, w []float32, n, c, h, wd, m, kh, kw, stride, pad, dil, group int) ([]float32, int, int) {
	oh := (h+2*pad-dil*(kh-1)-1)/stride + 1
	ow := (wd+2*pad-dil*(kw-1)-1)/stride + 1
	cg, mg := c/group, m/group
	out := make([]float32, n*m*oh*ow)
	for b := 0; b < n; b++ {
		for o := 0; o < m; o++ {
			g := o / mg
			for y := 0; y < oh; y++ {
				for xx := 0; xx < ow; xx++ {
					var s float64
					for ci := 0; ci < cg; ci++ {
						for ky := 0; ky < kh; ky++ {
							for kx := 0; kx < kw; kx++ {
								iy, ix := y*stride+ky*dil-pad, xx*stride+kx*dil-pad
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								s += float64(x[((b*c+g*cg+ci)*h+iy)*wd+ix]) * float64(w[((o*cg+ci)*kh+ky)*kw+kx])
							}
						}
					}
					out[((b*m+o)*oh+y)*ow+xx] = float32(s)
				}
			}
		}
	}
	return out, oh, ow
}

func TestConvMatchesDirectLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		return v
	}
	for _, c := range []struct{ n, c, h, w, m, k, stride, pad, dil, group int }{
		{1, 3, 9, 7, 4, 3, 1, 1, 1, 1},
		{2, 4, 8, 8, 6, 3, 2, 0, 1, 2},
		{1, 8, 10, 10, 8, 3, 1, 2, 2, 8}, // depthwise, dilated
		{1, 2, 5, 5, 3, 1, 1, 0, 1, 1},
	} {
		x, w := rnd(c.n*c.c*c.h*c.w), rnd(c.m*(c.c/c.group)*c.k*c.k)
		want, oh, ow := directConv(x, w, c.n, c.c, c.h, c.w, c.m, c.k, c.k, c.stride, c.pad, c.dil, c.group)
		b := graph.NewBuilder("main")
		xv := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(int64(c.n), int64(c.c), int64(c.h), int64(c.w))...))
		wv := b.Const("w", tensor.MustFromSlice(tensor.Shape{c.m, c.c / c.group, c.k, c.k}, w))
		s, p, d := int64(c.stride), int64(c.pad), int64(c.dil)
		y := op1(t, b, graph.OpConv, &graph.ConvAttrs{Group: int64(c.group), Strides: []int64{s, s}, Pads: []int64{p, p, p, p}, Dilations: []int64{d, d}, AutoPad: "NOTSET"}, xv, wv)
		mod, err := b.Module(y)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Eval(mod, map[string]Value{"x": tensor.MustFromSlice(tensor.Shape{c.n, c.c, c.h, c.w}, x)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := res[0].(*tensor.Tensor)
		if !got.Shape.Equal(tensor.Shape{c.n, c.m, oh, ow}) {
			t.Fatalf("%+v: shape %v, want [%d %d %d %d]", c, got.Shape, c.n, c.m, oh, ow)
		}
		for i, v := range got.Data.([]float32) {
			if math.Abs(float64(v-want[i])) > 1e-4 {
				t.Fatalf("%+v: element %d = %v, want %v", c, i, v, want[i])
			}
		}
	}
}

func TestMatMulBroadcastsBatch(t *testing.T) {
	a := tensor.MustFromSlice(tensor.Shape{2, 1, 2, 3}, []float32{1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6})
	bm := tensor.MustFromSlice(tensor.Shape{3, 1}, []float32{1, 0, 1})
	out, err := nnMatMul(&graph.Node{Op: graph.OpMatMul}, []*tensor.Tensor{a, bm})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].String(); got != "f32[2,1,2,1]{4, 10, -4, -10}" {
		t.Errorf("matmul = %s", got)
	}
}
