package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// ConvBlockedAttrs are the static attributes of a blocked 2-D convolution.
type ConvBlockedAttrs struct {
	Strides, Dilations [2]int64
	Pads               [4]int64 // top, left, bottom, right
	CB, MB             int64    // channel blocks the convolution computes in
	// XBlock is how x is stored: 0 plain NCHW, else [N, C/XBlock, H, W, XBlock].
	XBlock int64
	// BlockedOut leaves the result in the conv stage's storage, [N, M/MB, OH, OW, MB]
	// (M must be a multiple of MB), instead of unpacking it to NCHW.
	BlockedOut bool
	// OutBlock, with BlockedOut and when not 0 or MB, stores the result in blocks of
	// OutBlock instead, [N, M/OutBlock, OH, OW, OutBlock] (a divisor of MB, and of M):
	// the "unpack" stage repacks the conv stage's blocks into it. A layer whose output
	// channels no tile width divides (RegNetX's 400, computed in tiles of 32) then still
	// hands its readers blocked data.
	OutBlock int64
	// SplitOut computes the NCHW result as [N, M/sb, sb, OH, OW] (its storage; sb is
	// SplitBlock: MB where it divides M, M where M is less than MB): the unpacking then
	// reads the conv stage at a permutation of its own iterators, so that it (and the
	// epilogues) can run under the output row loop.
	SplitOut bool
}

// inPlace reports whether the convolution reads x as it is stored, with no padded copy:
// no padding, and either x blocked in blocks of CB (its storage is then the padded
// copy's layout) or a 1×1 kernel over plain NCHW data (the merged reduction axis is
// then the input channel, read a channel plane apart).
func (a ConvBlockedAttrs) inPlace(kw int64) bool {
	if a.Pads != [4]int64{} || a.columns(kw) {
		return false
	}
	return a.XBlock == a.CB || (a.XBlock == 0 && kw == 1)
}

// columns reports whether the "pad" stage lays out each output column's kernel columns
// side by side (a convolution of kw > 1 kernel columns dilated horizontally): the
// merged column·channel reduction axis is then contiguous for every output column,
// which dilated columns of the input are not.
func (a ConvBlockedAttrs) columns(kw int64) bool { return kw > 1 && a.Dilations[1] != 1 }

// ConvNCHWBlocked is a convolution that reads NCHW data (or blocked data, XBlock: x
// [N, C/XBlock, H, W, XBlock], or when read in place its merged view [N, C/XBlock, H,
// W·XBlock]) and writes NCHW results (or leaves them blocked, BlockedOut) but computes
// in blocked layouts, the form the CPU strategy tensorizes, in three stages:
//
//   - "pad": x repacked into [N, C/cb, H+pt+pb, (W+pl+pr)·cb] with zero borders (the
//     kernel column and input channel merge into one contiguous reduction axis); none
//     when x is read in place (no padding, and x blocked in blocks of cb or a 1×1
//     kernel over plain data); with horizontal dilation (columns), [N, C/cb, H+pt+pb,
//     OW·KW·cb]: the KW input columns output column ox reads, side by side, so the
//     conv stage reads them as a convolution of stride KW over that row;
//   - "conv": [N, ⌈M/mb⌉, OH, OW, mb] = Σ pad · w over (input block, kernel row, merged
//     column·channel), w being the weights prepacked by PackConvWeights;
//   - "unpack": the NCHW result (viewed as [N, M/sb, sb, OH, OW] with SplitOut), with
//     the bias added when bias is not nil.
//
// C must be a multiple of cb; M need not be a multiple of mb (the weights' padding
// channels are zero and never unpacked).
func ConvNCHWBlocked(x, w, bias *te.Tensor, m int64, a ConvBlockedAttrs) (*te.Tensor, error) {
	ext, merged, err := blockedDataExtents(x, a.XBlock, "blocked conv2d")
	if err != nil {
		return nil, err
	}
	n, c, h, wd := ext[0], ext[1], ext[2], ext[3]
	read := func(nn, ch, y, xx loopir.Expr) loopir.Expr {
		if a.XBlock == 0 {
			return x.At(nn, ch, y, xx)
		}
		return x.At(nn, div(ch, i64(a.XBlock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(a.XBlock)))
	}
	cb, mb := a.CB, a.MB
	if cb <= 0 || mb <= 0 || c%cb != 0 {
		return nil, kernels.Unsupported("blocked conv2d: %d channels in blocks of %d", c, cb)
	}
	wext, err := kernels.Extents(w)
	if err != nil {
		return nil, err
	}
	if len(wext) != 5 || wext[1] != c/cb || wext[3]%cb != 0 || wext[4] != mb || wext[0]*mb < m {
		return nil, fmt.Errorf("BUG: blocked conv2d: weights %v for %d→%d channels in blocks %d/%d", wext, c, m, cb, mb)
	}
	kh, kw := wext[2], wext[3]/cb
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	oh := (h+pt+pb-a.Dilations[0]*(kh-1)-1)/a.Strides[0] + 1
	ow := (wd+pl+pr-a.Dilations[1]*(kw-1)-1)/a.Strides[1] + 1
	if oh <= 0 || ow <= 0 {
		return nil, kernels.Unsupported("blocked conv2d: empty output %dx%d", oh, ow)
	}
	dt := x.DT
	icb, ry, rr := te.RAxis("icb", i64(c/cb)), te.RAxis("ry", i64(kh)), te.RAxis("rr", i64(kw*cb))
	if merged != (a.inPlace(kw) && a.XBlock != 0) {
		return nil, fmt.Errorf("BUG: blocked conv2d: data %v read in place %v, merged %v", x.Shape, a.inPlace(kw), merged)
	}
	if a.inPlace(kw) {
		// the micro-kernels read x itself: blocked data [N, C/cb, H, W, cb] is the
		// padded copy's [N, C/cb, H, W·cb] (row = its column times cb plus the channel);
		// plain data is read at channel icb·cb + rr of column ow·stride
		conv := te.Compute("conv", kernels.Static(n, wext[0], oh, ow, mb), func(i []loopir.Expr) loopir.Expr {
			row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
			var v loopir.Expr
			if a.XBlock == 0 {
				v = x.At(i[0], add(mul(icb.Var, i64(cb)), rr.Var), row, mul(i[3], i64(a.Strides[1])))
			} else {
				v = x.At(i[0], icb.Var, row, add(mul(i[3], i64(a.Strides[1]*cb)), rr.Var))
			}
			return te.Sum(te.Mul(v, w.At(i[1], icb.Var, ry.Var, rr.Var, i[4])), icb, ry, rr)
		})
		return convResult(conv, bias, m, mb, a)
	}
	cols, colStride := (wd+pl+pr)*cb, a.Strides[1]*cb
	if a.columns(kw) {
		cols, colStride = ow*kw*cb, kw*cb
	}
	pad := te.Compute("pad", kernels.Static(n, c/cb, h+pt+pb, cols), func(i []loopir.Expr) loopir.Expr {
		yy := sub(i[2], i64(pt))
		xx := sub(div(i[3], i64(cb)), i64(pl))
		if a.columns(kw) {
			// column q = ox·KW + kx of the row reads input column ox·s + kx·dx
			q := div(i[3], i64(cb))
			ox, kx := div(q, i64(kw)), loopir.Bin(loopir.Mod, q, i64(kw))
			xx = sub(add(mul(ox, i64(a.Strides[1])), mul(kx, i64(a.Dilations[1]))), i64(pl))
		}
		ch := add(mul(i[1], i64(cb)), loopir.Bin(loopir.Mod, i[3], i64(cb)))
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		return te.Select(cond, read(i[0], ch, clampIndex(yy, h), clampIndex(xx, wd)), loopir.Float(0, dt))
	})
	conv := te.Compute("conv", kernels.Static(n, wext[0], oh, ow, mb), func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
		col := add(mul(i[3], i64(colStride)), rr.Var)
		return te.Sum(te.Mul(pad.At(i[0], icb.Var, row, col), w.At(i[1], icb.Var, ry.Var, rr.Var, i[4])), icb, ry, rr)
	})
	return convResult(conv, bias, m, mb, a)
}

// blockedDataExtents is the NCHW extents of a blocked convolution's data x stored as
// xblock says (0 plain; [N, C/xblock, H, W, xblock]; or, read in place, the merged view
// [N, C/xblock, H, W·xblock], merged true).
func blockedDataExtents(x *te.Tensor, xblock int64, what string) (ext []int64, merged bool, err error) {
	if ext, err = kernels.Extents(x); err != nil {
		return nil, false, err
	}
	switch {
	case len(ext) == 5 && xblock == ext[4]:
		ext = []int64{ext[0], ext[1] * ext[4], ext[2], ext[3]}
	case len(ext) == 4 && xblock != 0: // blocked data viewed as [N, C/xblock, H, W·xblock]
		if ext[3]%xblock != 0 {
			return nil, false, fmt.Errorf("BUG: %s: merged data %v in blocks of %d", what, ext, xblock)
		}
		ext, merged = []int64{ext[0], ext[1] * xblock, ext[2], ext[3] / xblock}, true
	}
	if len(ext) != 4 {
		return nil, false, kernels.Unsupported("%s: data %v", what, x.Shape)
	}
	return ext, merged, nil
}

// convResult is the blocked convolution's result from its "conv" stage: left blocked
// (with the bias added in block "bias") or unpacked to NCHW in block "unpack".
func convResult(conv, bias *te.Tensor, m, mb int64, a ConvBlockedAttrs) (*te.Tensor, error) {
	n, oh, ow := conv.Shape[0], conv.Shape[2], conv.Shape[3]
	if a.SplitOut {
		sb := SplitBlock(m, mb)
		if sb == 0 || a.BlockedOut {
			return nil, fmt.Errorf("BUG: blocked conv2d output of %d channels split in blocks of %d (blocked %v)", m, mb, a.BlockedOut)
		}
		return te.Compute("unpack", []loopir.Expr{n, i64(m / sb), i64(sb), oh, ow}, func(i []loopir.Expr) loopir.Expr {
			v := conv.At(i[0], i[1], i[3], i[4], i[2])
			if bias != nil {
				v = te.Add(v, bias.At(add(mul(i[1], i64(mb)), i[2])))
			}
			return v
		}), nil
	}
	if a.BlockedOut && a.OutBlock != 0 && a.OutBlock != mb {
		ob := a.OutBlock
		if m%ob != 0 || mb%ob != 0 {
			return nil, fmt.Errorf("BUG: blocked conv2d output of %d channels computed in blocks of %d, stored in blocks of %d", m, mb, ob)
		}
		return te.Compute("unpack", []loopir.Expr{n, i64(m / ob), oh, ow, i64(ob)}, func(i []loopir.Expr) loopir.Expr {
			ch := add(mul(i[1], i64(ob)), i[4])
			v := conv.At(i[0], div(i[1], i64(mb/ob)), i[2], i[3], add(mul(loopir.Bin(loopir.Mod, i[1], i64(mb/ob)), i64(ob)), i[4]))
			if bias != nil {
				v = te.Add(v, bias.At(ch))
			}
			return v
		}), nil
	}
	if a.BlockedOut {
		if m%mb != 0 {
			return nil, fmt.Errorf("BUG: blocked conv2d output of %d channels in blocks of %d", m, mb)
		}
		if bias == nil {
			return conv, nil
		}
		return te.Compute("bias", conv.Shape, func(i []loopir.Expr) loopir.Expr {
			return te.Add(conv.At(i...), bias.At(add(mul(i[1], i64(mb)), i[4])))
		}), nil
	}
	return te.Compute("unpack", []loopir.Expr{n, i64(m), oh, ow}, func(i []loopir.Expr) loopir.Expr {
		v := conv.At(i[0], div(i[1], i64(mb)), i[2], i[3], loopir.Bin(loopir.Mod, i[1], i64(mb)))
		if bias != nil {
			v = te.Add(v, bias.At(i[1]))
		}
		return v
	}), nil
}

// SplitBlock is the channel block of a split result ([N, M/sb, sb, OH, OW],
// ConvBlockedAttrs.SplitOut) of m channels computed in blocks of mb: mb where it
// divides m, m itself where m is less than one block (the conv stage's one block, its
// padding channels never read), else 0 (no split).
func SplitBlock(m, mb int64) int64 {
	switch {
	case m%mb == 0:
		return mb
	case m < mb:
		return m
	}
	return 0
}

// PackConvWeights reorders float32 OIHW weights [M, C, KH, KW] into the blocked layout
// [⌈M/mb⌉, C/cb, KH, KW·cb, mb] that ConvNCHWBlocked reads, zero past M.
func PackConvWeights(w *tensor.Tensor, cb, mb int64) (*tensor.Tensor, error) {
	v, ok := w.Data.([]float32)
	if !ok || len(w.Shape) != 4 {
		return nil, fmt.Errorf("weights %v%v: want float32 OIHW", w.DType, w.Shape)
	}
	m, c, kh, kw := int64(w.Shape[0]), int64(w.Shape[1]), int64(w.Shape[2]), int64(w.Shape[3])
	if c%cb != 0 {
		return nil, fmt.Errorf("%d input channels are not a multiple of %d", c, cb)
	}
	mbs := (m + mb - 1) / mb
	out := make([]float32, mbs*c*kh*kw*mb)
	for o := int64(0); o < m; o++ {
		for i := int64(0); i < c; i++ {
			for y := int64(0); y < kh; y++ {
				for x := int64(0); x < kw; x++ {
					out[((((o/mb)*(c/cb)+i/cb)*kh+y)*kw*cb+x*cb+i%cb)*mb+o%mb] = v[((o*c+i)*kh+y)*kw+x]
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{int(mbs), int(c / cb), int(kh), int(kw * cb), int(mb)}, out)
}

// MatMulPrepacked is C[m, n] = Σ_k A[m, k]·Bp[n/nr, k, n%nr] with B already in column
// panels (PackMatMulB), then "epilogue": C + bias[n] when bias is not nil. The product
// block is "matmul".
func MatMulPrepacked(a, bp, bias *te.Tensor, n int64) *te.Tensor {
	nr := bp.Shape[2].(*loopir.IntImm).V
	r := te.RAxis("k", a.Shape[1])
	mm := te.Compute("matmul", []loopir.Expr{a.Shape[0], i64(n)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), bp.At(div(i[1], i64(nr)), r.Var, loopir.Bin(loopir.Mod, i[1], i64(nr)))), r)
	})
	if bias == nil {
		return mm
	}
	return te.Compute("epilogue", mm.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Add(mm.At(i...), kernels.BroadcastAt(bias, i))
	})
}

// PackMatMulB reorders float32 weights B [K, N] (or [N, K] when transposed) into column
// panels [⌈N/nr⌉, K, nr], zero past N, each multiplied by alpha.
func PackMatMulB(b *tensor.Tensor, transposed bool, nr int64, alpha float32) (*tensor.Tensor, error) {
	v, ok := b.Data.([]float32)
	if !ok || len(b.Shape) != 2 {
		return nil, fmt.Errorf("matrix %v%v: want 2-D float32", b.DType, b.Shape)
	}
	k, n := int64(b.Shape[0]), int64(b.Shape[1])
	if transposed {
		k, n = n, k
	}
	panels := (n + nr - 1) / nr
	out := make([]float32, panels*k*nr)
	for j := int64(0); j < n; j++ {
		for r := int64(0); r < k; r++ {
			x := v[r*n+j]
			if transposed {
				x = v[j*k+r]
			}
			out[((j/nr)*k+r)*nr+j%nr] = x * alpha
		}
	}
	return tensor.FromSlice(tensor.Shape{int(panels), int(k), int(nr)}, out)
}
