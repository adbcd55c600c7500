package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// DepthwiseAttrs are the static attributes of a blocked depthwise convolution.
type DepthwiseAttrs struct {
	Strides, Dilations [2]int64
	Pads               [4]int64 // top, left, bottom, right
	// Block is the channel block the convolution computes in (and stores its output
	// in when BlockedOut): the output channels are a multiple of it.
	Block int64
	// Mult is the channel multiplier: output channel o reads input channel o/Mult (a
	// grouped convolution's output channels per group).
	Mult int64
	// GroupIn is a grouped convolution's input channels per group (GroupedNCHWc).
	GroupIn int64
	// XBlock is how x is stored: 0 plain NCHW, else [N, C/XBlock, H, W, XBlock].
	XBlock int64
	// BlockedOut leaves the result in [N, M/Block, OH, OW, Block] instead of NCHW.
	BlockedOut bool
	// Pair, when above 1, computes Pair adjacent output columns of a block in one
	// vector of Pair·Block lanes (a block narrower than the target's vector: AVX-512's
	// 16 lanes over MobileNetV3's blocks of 8). With a horizontal stride of 1 the
	// columns' inputs are adjacent in the padded row, so the vector's input is one
	// contiguous run; the weights are packed with each block's lanes repeated Pair
	// times. The output columns are a multiple of Pair.
	Pair int64
}

// DepthwiseNCHWc is a depthwise convolution (one group per input channel, Mult
// output channels each) computed on channel blocks, in stages:
//
//   - "pad": x in the output's channel blocks with zero borders, [N, M/B, H+pt+pb,
//     W+pl+pr, B] (output channel o reads input channel o/Mult, through x's storage);
//   - "dwconv": [N, M/B, OH, OW, B] = Σ over the kernel's rows and columns of pad · w,
//     w being the weights prepacked by PackDepthwiseWeights, [M/B, KH, KW, B]; with
//     Pair P > 1, [N, M/B, OH, OW/P, P·B] (the same storage: P columns of B lanes per
//     vector), w packed [M/B, KH, KW, P·B] with the lanes repeated;
//   - with BlockedOut, "bias" (when bias is not nil, and always when paired: the
//     columns back to [N, M/B, OH, OW, B]) on the blocked result; else "unpack": the
//     NCHW result, with the bias added when bias is not nil.
//
// The channel lanes of a block are the innermost axis of every stage, so a schedule
// vectorizes them with unit stride; the pad stage is meant to be computed per output
// row (ScheduleDepthwise), a buffer of the kernel's span of rows.
func DepthwiseNCHWc(x, w, bias *te.Tensor, a DepthwiseAttrs) (*te.Tensor, error) {
	ext, err := nchwExtents(x, a.XBlock, "depthwise conv2d")
	if err != nil {
		return nil, err
	}
	n, c, h, wd := ext[0], ext[1], ext[2], ext[3]
	bl, mult := a.Block, a.Mult
	m := c * mult
	if bl <= 0 || mult <= 0 || m%bl != 0 {
		return nil, kernels.Unsupported("depthwise conv2d: %d output channels in blocks of %d", m, bl)
	}
	wext, err := kernels.Extents(w)
	if err != nil {
		return nil, err
	}
	pair := max(a.Pair, 1)
	if len(wext) != 4 || wext[0] != m/bl || wext[3] != bl*pair {
		return nil, fmt.Errorf("BUG: depthwise conv2d: weights %v for %d channels in blocks of %d, %d columns a vector", wext, m, bl, pair)
	}
	kh, kw := wext[1], wext[2]
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	sh, sw, dh, dw := a.Strides[0], a.Strides[1], a.Dilations[0], a.Dilations[1]
	oh := (h+pt+pb-dh*(kh-1)-1)/sh + 1
	ow := (wd+pl+pr-dw*(kw-1)-1)/sw + 1
	if oh <= 0 || ow <= 0 {
		return nil, kernels.Unsupported("depthwise conv2d: empty output %dx%d", oh, ow)
	}
	read := func(nn, ch, y, xx loopir.Expr) loopir.Expr {
		if mult != 1 {
			ch = div(ch, i64(mult))
		}
		if a.XBlock == 0 {
			return x.At(nn, ch, y, xx)
		}
		return x.At(nn, div(ch, i64(a.XBlock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(a.XBlock)))
	}
	dt := x.DT
	pad := te.Compute("pad", kernels.Static(n, m/bl, h+pt+pb, wd+pl+pr, bl), func(i []loopir.Expr) loopir.Expr {
		yy, xx := sub(i[2], i64(pt)), sub(i[3], i64(pl))
		ch := add(mul(i[1], i64(bl)), i[4])
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		return te.Select(cond, read(i[0], ch, clampIndex(yy, h), clampIndex(xx, wd)), loopir.Float(0, dt))
	})
	ry, rx := te.RAxis("ry", i64(kh)), te.RAxis("rx", i64(kw))
	if pair > 1 {
		if sw != 1 || ow%pair != 0 {
			return nil, fmt.Errorf("BUG: depthwise conv2d: %d columns a vector at horizontal stride %d over %d columns", pair, sw, ow)
		}
		// lane v of column pair q: column q·P + v/B, channel lane v%B; the padded row's
		// flat index (q·P + v/B + rx·dw)·B + v%B is affine in v
		conv := te.Compute("dwconv", kernels.Static(n, m/bl, oh, ow/pair, bl*pair), func(i []loopir.Expr) loopir.Expr {
			row := add(mul(i[2], i64(sh)), mul(ry.Var, i64(dh)))
			col := add(add(mul(i[3], i64(pair)), div(i[4], i64(bl))), mul(rx.Var, i64(dw)))
			return te.Sum(te.Mul(pad.At(i[0], i[1], row, col, loopir.Bin(loopir.Mod, i[4], i64(bl))), w.At(i[1], ry.Var, rx.Var, i[4])), ry, rx)
		})
		return blockedResultAt(conv, bias, m, bl, a.BlockedOut, i64(ow), func(i ...loopir.Expr) loopir.Expr {
			// column ow, lane l: pair ow/P, lane (ow%P)·B + l
			return conv.At(i[0], i[1], i[2], div(i[3], i64(pair)), add(mul(loopir.Bin(loopir.Mod, i[3], i64(pair)), i64(bl)), i[4]))
		}), nil
	}
	conv := te.Compute("dwconv", kernels.Static(n, m/bl, oh, ow, bl), func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(sh)), mul(ry.Var, i64(dh)))
		col := add(mul(i[3], i64(sw)), mul(rx.Var, i64(dw)))
		return te.Sum(te.Mul(pad.At(i[0], i[1], row, col, i[4]), w.At(i[1], ry.Var, rx.Var, i[4])), ry, rx)
	})
	return blockedResult(conv, bias, m, bl, a.BlockedOut), nil
}

// blockedResult is the result of a convolution computed as conv [N, M/bl, OH, OW, bl]:
// conv itself or "bias" (conv plus bias) when blockedOut, else "unpack", the NCHW
// result with the bias added when bias is not nil.
func blockedResult(conv, bias *te.Tensor, m, bl int64, blockedOut bool) *te.Tensor {
	return blockedResultAt(conv, bias, m, bl, blockedOut, conv.Shape[3], nil)
}

// blockedResultAt is blockedResult for a convolution of ow output columns whose value
// at blocked indices [n, cb, oh, ow, lane] is at(...) (nil: conv.At): a paired
// depthwise result, stored as [N, M/bl, OH, OW/P, P·bl], is read at its columns'
// pairs. Its blocked result is then a "bias" stage even without a bias (conv's shape
// is not the output's).
func blockedResultAt(conv, bias *te.Tensor, m, bl int64, blockedOut bool, ow loopir.Expr, at func(i ...loopir.Expr) loopir.Expr) *te.Tensor {
	paired := at != nil
	if !paired {
		at = conv.At
	}
	if blockedOut {
		if bias == nil && !paired {
			return conv
		}
		shape := []loopir.Expr{conv.Shape[0], conv.Shape[1], conv.Shape[2], ow, i64(bl)}
		return te.Compute("bias", shape, func(i []loopir.Expr) loopir.Expr {
			if bias == nil {
				return at(i...)
			}
			return te.Add(at(i...), bias.At(add(mul(i[1], i64(bl)), i[4])))
		})
	}
	shape := []loopir.Expr{conv.Shape[0], i64(m), conv.Shape[2], ow}
	return te.Compute("unpack", shape, func(i []loopir.Expr) loopir.Expr {
		v := at(i[0], div(i[1], i64(bl)), i[2], i[3], loopir.Bin(loopir.Mod, i[1], i64(bl)))
		if bias != nil {
			v = te.Add(v, bias.At(i[1]))
		}
		return v
	})
}

// PackDepthwiseWeights reorders float32 depthwise weights [M, 1, KH, KW] into the
// blocked layout [M/bl, KH, KW, bl] that DepthwiseNCHWc reads.
func PackDepthwiseWeights(w *tensor.Tensor, bl int64) (*tensor.Tensor, error) {
	return PackDepthwiseWeightsPaired(w, bl, 1)
}

// PackDepthwiseWeightsPaired is PackDepthwiseWeights for a paired convolution
// (DepthwiseAttrs.Pair): [M/bl, KH, KW, pair·bl], each tap's bl lanes repeated pair
// times, one vector's weights for pair adjacent columns.
func PackDepthwiseWeightsPaired(w *tensor.Tensor, bl, pair int64) (*tensor.Tensor, error) {
	v, ok := w.Data.([]float32)
	if !ok || len(w.Shape) != 4 || w.Shape[1] != 1 {
		return nil, fmt.Errorf("weights %v%v: want float32 [M, 1, KH, KW]", w.DType, w.Shape)
	}
	m, kh, kw := int64(w.Shape[0]), int64(w.Shape[2]), int64(w.Shape[3])
	if bl <= 0 || m%bl != 0 || pair <= 0 {
		return nil, fmt.Errorf("%d output channels in blocks of %d, %d columns a vector: not a whole number of blocks", m, bl, pair)
	}
	lanes := bl * pair
	out := make([]float32, m*kh*kw*pair)
	for o := int64(0); o < m; o++ {
		for y := int64(0); y < kh; y++ {
			for x := int64(0); x < kw; x++ {
				for p := int64(0); p < pair; p++ {
					out[(((o/bl)*kh+y)*kw+x)*lanes+p*bl+o%bl] = v[(o*kh+y)*kw+x]
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{int(m / bl), int(kh), int(kw), int(lanes)}, out)
}

// nchwExtents returns the logical [N, C, H, W] extents of x, stored plain or in channel
// blocks of xblock ([N, C/xblock, H, W, xblock]); what names the op in the error for
// any other rank.
func nchwExtents(x *te.Tensor, xblock int64, what string) ([]int64, error) {
	ext, err := kernels.Extents(x)
	if err != nil {
		return nil, err
	}
	if len(ext) == 5 && xblock == ext[4] {
		ext = []int64{ext[0], ext[1] * ext[4], ext[2], ext[3]}
	}
	if len(ext) != 4 {
		return nil, kernels.Unsupported("%s: data of rank %d", what, len(ext))
	}
	return ext, nil
}
