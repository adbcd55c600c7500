package kernels_test

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// exactLowerer lowers as l and builds the kernel without contraction, as the compiler
// builds one whose result a quantizer rounds.
type exactLowerer struct{ l nt.Lowerer }

func (e exactLowerer) Lower(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
	impl, err := e.l.Lower(n, in, t)
	if err == nil {
		impl.Func.NoContract = true
	}
	return impl, err
}

// ortBilinear is ONNX Runtime's bilinear upsampling of x [c, h, w] to [c, oh, ow]
// (UpsampleBilinear: float32 source coordinates, the last element's two taps weighted
// 1/2 each, the corners' weight products summed in row order), every operation rounded
// to float32 on its own.
func ortBilinear(x []float32, c, h, w, oh, ow int, halfPixel bool) []float32 {
	type tap struct {
		i1, i2 int
		d1, d2 float32
	}
	taps := func(out, in int) []tap {
		scale := float32(out) / float32(in)
		r := make([]tap, out)
		for o := range r {
			v := float32(o) / scale
			if halfPixel {
				v = float32(float32(float32(o)+0.5)/scale) - 0.5
			}
			v = max(0, min(v, float32(in-1)))
			i1 := min(int(v), in-1)
			i2 := min(i1+1, in-1)
			d1, d2 := float32(math.Abs(float64(v-float32(i1)))), float32(math.Abs(float64(v-float32(i2))))
			if i1 == i2 {
				d1, d2 = 0.5, 0.5
			}
			r[o] = tap{i1, i2, d1, d2}
		}
		return r
	}
	ty, tx := taps(oh, h), taps(ow, w)
	y := make([]float32, c*oh*ow)
	for ch := range c {
		p := x[ch*h*w:]
		for oy, a := range ty {
			for ox, b := range tx {
				x11, x21 := p[a.i1*w+b.i1], p[a.i1*w+b.i2]
				x12, x22 := p[a.i2*w+b.i1], p[a.i2*w+b.i2]
				s := float32(float32(b.d2*a.d2) * x11)
				s = float32(s + float32(float32(b.d1*a.d2)*x21))
				s = float32(s + float32(float32(b.d2*a.d1)*x12))
				s = float32(s + float32(float32(b.d1*a.d1)*x22))
				y[(ch*oh+oy)*ow+ox] = s
			}
		}
	}
	return y
}

// TestLinearResizeRoundsAsONNXRuntime: built without contraction, linear Resize over
// H and W by 2 and by 4 (half_pixel and asymmetric: source coordinates exact in
// float32) computes ONNX Runtime's bilinear upsampling bit for bit, its last row and
// column included; a dynamically quantized network's next quantizer then rounds the
// same values.
func TestLinearResizeRoundsAsONNXRuntime(t *testing.T) {
	l := exactLowerer{genericLowerer()}
	for k, c := range []struct {
		coord     string
		ch, h, w  int
		factor    int
		halfPixel bool
	}{
		{"half_pixel", 3, 5, 7, 2, true}, {"half_pixel", 2, 4, 3, 4, true}, {"asymmetric", 2, 6, 5, 2, false},
	} {
		rc := resizeCase{mode: "linear", coord: c.coord, shape: []int{1, c.ch, c.h, c.w},
			sizes: sizes(1, int64(c.ch), int64(c.h*c.factor), int64(c.w*c.factor))}
		x := randomF32(uint64(40+k), rc.shape...)
		n := nodeOf(t, rc, x)
		got, _, err := nt.RunNode(l, n, rc.args(x))
		if err != nil {
			t.Fatalf("%v: %v", rc, err)
		}
		want := ortBilinear(x.Data.([]float32), c.ch, c.h, c.w, c.h*c.factor, c.w*c.factor, c.halfPixel)
		g := got[0].Data.([]float32)
		diff := 0
		for i := range want {
			if math.Float32bits(g[i]) != math.Float32bits(want[i]) {
				if diff == 0 {
					t.Errorf("%v: element %d = %g, ONNX Runtime's order gives %g", rc, i, g[i], want[i])
				}
				diff++
			}
		}
		if diff > 0 {
			t.Errorf("%v: %d of %d elements differ", rc, diff, len(want))
		}
	}
}

// nodeOf is the Resize node of c on x.
func nodeOf(t *testing.T, c resizeCase, x *tensor.Tensor) *graph.Node {
	mod, _ := nt.Build(t, graph.OpResize, c.attrs(), 1, c.args(x)...)
	return mod.Main.Nodes[len(mod.Main.Nodes)-1]
}
