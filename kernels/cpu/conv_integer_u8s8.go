package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The 8-bit form of the blocked integer convolution (AVX-512 VNNI: intrin.GemmU8S8):
// where the data is uint8 and the weights minus their zero point fit int8 (symmetric
// int8 weights, as static quantization writes them), the padded copy holds the data as
// stored and the micro-kernel multiplies quads of bytes, twice the int16 pairs' rate.
// Σ (x − zx)·w' = Σ x·w' − zx·Σ w' over the whole window (the borders hold zx, whose
// terms cancel): the second sum is a constant per output channel, packed on the host,
// and its product with zx is added to the result as a bias.

// fitsInt8 reports whether every weight minus its zero point (zw: nil, one value or one
// per output channel) is within int8.
func fitsInt8(w, zw *tensor.Tensor) bool {
	v := w.Float64s()
	var z []float64
	if zw != nil {
		z = zw.Float64s()
	}
	per := len(v) / max(w.Shape[0], 1)
	for i, x := range v {
		switch len(z) {
		case 0:
		case 1:
			x -= z[0]
		default:
			x -= z[i/per]
		}
		if x < -128 || x > 127 {
			return false
		}
	}
	return true
}

// convU8S8Stages builds ConvIntegerBlocked's 8-bit form of integer convolution n on
// data x (in[0]'s tensor, or its in-place view; the other operands at idx among in; zx
// the data's zero point, nil for none; zw the weights' constant one) in tiles nr wide:
// the stages, their params and feeds.
func convU8S8Stages(x *te.Tensor, in []kernels.Input, idx integerInputs, zx *te.Tensor, zw *tensor.Tensor, m, kh, kw int64, attrs ConvBlockedAttrs, nr int64) (*te.Tensor, []*te.Tensor, []kernels.Param, error) {
	w := in[idx.w].Const
	packed := []int64{(m + nr - 1) / nr, (int64(w.Shape[1]) + attrs.CB - 1) / attrs.CB, kh, kw * attrs.CB / 4, nr, 4}
	wp := te.Placeholder("w", tensor.Int8, kernels.Static(packed...)...)
	layout := fmt.Sprintf("OIHW−%s→i8[O/%d,I/%d,H,W·%d/4,%d,4]", zeroPointText(zw), nr, attrs.CB, attrs.CB, nr)
	params := []*te.Tensor{x, wp}
	feeds := []kernels.Param{{Input: 0}, {Input: idx.w, Layout: layout, Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
		return PackConvWeightsInt8(v, zw, attrs.CB, nr)
	}}}
	var bias *te.Tensor
	if zx != nil {
		sums := te.Placeholder("w_sums", tensor.Int32, kernels.Static(m)...)
		params = append(params, zx, sums)
		feeds = append(feeds, kernels.Param{Input: idx.zx}, kernels.Param{Input: idx.w, Layout: fmt.Sprintf("OIHW−%s→−Σ i32[O]", zeroPointText(zw)),
			Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) { return NegatedWeightSums(v, zw) }})
		zi := make([]loopir.Expr, len(zx.Shape))
		for k := range zi {
			zi[k] = i64(0)
		}
		bias = te.Compute("zero_point_term", kernels.Static(m), func(i []loopir.Expr) loopir.Expr {
			return te.Mul(te.Cast(tensor.Int32, zx.At(zi...)), sums.At(i[0]))
		})
	}
	out, err := ConvIntegerBlocked(x, zx, wp, bias, m, kh, kw, 4, attrs)
	return out, params, feeds, err
}

// PackConvWeightsInt8 is PackConvWeightsInt16 in quads of int8: [⌈M/mb⌉, ⌈C/cb⌉, KH,
// KW·cb/4, mb, 4], the merged position r at [r/4, o%mb, r%4]. The weights minus their
// zero point must fit int8 (fitsInt8).
func PackConvWeightsInt8(w, zw *tensor.Tensor, cb, mb int64) (*tensor.Tensor, error) {
	m, c, kh, kw, z, err := convWeightsShape(w, zw, cb, 4)
	if err != nil {
		return nil, err
	}
	v := w.Float64s()
	mbs, run, blocks := (m+mb-1)/mb, kw*cb, (c+cb-1)/cb // channels past c pack as zeros
	out := make([]int8, mbs*blocks*cb*kh*kw*mb)
	for o := int64(0); o < m; o++ {
		for i := int64(0); i < c; i++ {
			for y := int64(0); y < kh; y++ {
				for x := int64(0); x < kw; x++ {
					r := x*cb + i%cb
					d := v[((o*c+i)*kh+y)*kw+x] - z(o)
					if d < -128 || d > 127 {
						return nil, fmt.Errorf("weight %v minus its zero point outside int8", d+z(o))
					}
					out[((((o/mb)*blocks+i/cb)*kh+y)*(run/4)+r/4)*mb*4+(o%mb)*4+r%4] = int8(d)
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{int(mbs), int(blocks), int(kh), int(run / 4), int(mb), 4}, out)
}

// NegatedWeightSums is −Σ (w − zw) over each output channel's window, as int32 [M].
func NegatedWeightSums(w, zw *tensor.Tensor) (*tensor.Tensor, error) {
	m, c, kh, kw, z, err := convWeightsShape(w, zw, 1, 1)
	if err != nil {
		return nil, err
	}
	v := w.Float64s()
	per := c * kh * kw
	out := make([]int32, m)
	for o := int64(0); o < m; o++ {
		s := 0.0
		for _, x := range v[o*per : (o+1)*per] {
			s += x - z(o)
		}
		out[o] = int32(-s)
	}
	return tensor.FromSlice(tensor.Shape{int(m)}, out)
}

// convWeightsShape checks 8-bit OIHW weights for blocks of cb channels (or one block
// wider than the channels, padded) whose merged (kernel column, channel) run is a
// multiple of group, and returns their extents and
// the zero point of each output channel (zw: nil, one value or one per channel).
func convWeightsShape(w, zw *tensor.Tensor, cb, group int64) (m, c, kh, kw int64, z func(int64) float64, err error) {
	if !eightBit(w.DType) || len(w.Shape) != 4 {
		return 0, 0, 0, 0, nil, fmt.Errorf("weights %v%v: want 8-bit OIHW", w.DType, w.Shape)
	}
	m, c, kh, kw = int64(w.Shape[0]), int64(w.Shape[1]), int64(w.Shape[2]), int64(w.Shape[3])
	if c%cb != 0 && c > cb || kw*cb%group != 0 {
		return 0, 0, 0, 0, nil, fmt.Errorf("%d input channels in blocks of %d over %d kernel columns", c, cb, kw)
	}
	var zs []float64
	if zw != nil {
		if zs = zw.Float64s(); len(zs) != 1 && int64(len(zs)) != m {
			return 0, 0, 0, 0, nil, fmt.Errorf("weight zero point of %d values for %d output channels", len(zs), m)
		}
	}
	z = func(o int64) float64 {
		switch len(zs) {
		case 0:
			return 0
		case 1:
			return zs[0]
		}
		return zs[o]
	}
	return m, c, kh, kw, z, nil
}
