package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Winograd F(2×2, 3×3) convolution (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016): each 2×2 output tile is Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A over the
// 4×4 input tile d, so a 3×3 convolution becomes 16 independent products
// M[t] = V[t]·U[t] of [tiles × C] by [C × K] matrices (t = 4a + b, one per element of
// the 4×4 transformed tile) with 2.25× fewer multiplications than the direct
// convolution, between an input transform (additions only) and an output transform.
//
//	Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//	G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]
//	Aᵀ = [1 1 1 0; 0 1 -1 -1]
//
// Rows a of Bᵀ have two nonzeros: +1 at winoI1[a] and winoS2[a] at winoI2[a].
var (
	winoI1 = [4]int64{0, 1, 2, 1}
	winoI2 = [4]int64{2, 2, 1, 3}
	winoS2 = [4]float64{-1, 1, -1, -1}
	winoG  = [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
)

// WinogradAttrs are the layouts and padding of a Winograd convolution.
type WinogradAttrs struct {
	Pads [4]int64 // top, left, bottom, right
	// XBlock is how x is stored: 0 plain NCHW, else [N, C/XBlock, H, W, XBlock].
	XBlock int64
	// OutBlock is how the result is stored: 0 NCHW, else [N, K/OutBlock, OH, OW, OutBlock].
	OutBlock int64
	// NR is how the transformed weights are stored: 0 as U [16, C, K]; else in column
	// panels [16, K/NR, C, NR] (PackWinogradPanels), each product's column tile of NR
	// reading one contiguous panel.
	NR int64
}

// TransformWinogradWeights turns float32 OIHW 3×3 weights [K, C, 3, 3] into
// U [16, C, K]: U[4a+b, c, k] = (G g[k, c] Gᵀ)[a, b].
func TransformWinogradWeights(w *tensor.Tensor) (*tensor.Tensor, error) {
	v, ok := w.Data.([]float32)
	if !ok || len(w.Shape) != 4 || w.Shape[2] != 3 || w.Shape[3] != 3 {
		return nil, fmt.Errorf("weights %v%v: want float32 [K, C, 3, 3]", w.DType, w.Shape)
	}
	k, c := w.Shape[0], w.Shape[1]
	out := make([]float32, 16*c*k)
	for o := range k {
		for i := range c {
			g := v[(o*c+i)*9:]
			var gg [4][3]float64 // G·g
			for a := range 4 {
				for x := range 3 {
					for y := range 3 {
						gg[a][x] += winoG[a][y] * float64(g[y*3+x])
					}
				}
			}
			for a := range 4 {
				for b := range 4 {
					var s float64 // (G g Gᵀ)[a, b]
					for x := range 3 {
						s += gg[a][x] * winoG[b][x]
					}
					out[((a*4+b)*c+i)*k+o] = float32(s)
				}
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{16, c, k}, out)
}

// PackWinogradPanels reorders transformed weights U [16, C, K] into column panels
// [16, K/nr, C, nr]: U[t, c, k] at [t, k/nr, c, k%nr]. K must be a multiple of nr. In
// [16, C, K] a product's column tile reads nr floats a row of K apart, and K·4 bytes a
// multiple of 2 KiB (512 output channels) maps the tile's rows to a few cache sets.
func PackWinogradPanels(u *tensor.Tensor, nr int64) (*tensor.Tensor, error) {
	v, ok := u.Data.([]float32)
	if !ok || len(u.Shape) != 3 || u.Shape[0] != 16 || nr <= 0 || int64(u.Shape[2])%nr != 0 {
		return nil, fmt.Errorf("transformed weights %v%v: want float32 [16, C, K], K a multiple of %d", u.DType, u.Shape, nr)
	}
	c, k := int64(u.Shape[1]), int64(u.Shape[2])
	out := make([]float32, len(v))
	for t := range int64(16) {
		for i := range c {
			for o := range k {
				out[((t*(k/nr)+o/nr)*c+i)*nr+o%nr] = v[(t*c+i)*k+o]
			}
		}
	}
	return tensor.FromSlice(tensor.Shape{16, int(k / nr), int(c), int(nr)}, out)
}

// ConvWinograd is a 3×3, stride 1, undilated, ungrouped convolution of x (NCHW or
// blocked, a.XBlock) with transformed weights u [16, C, K] (TransformWinogradWeights;
// in panels [16, K/a.NR, C, a.NR] when a.NR is set, PackWinogradPanels),
// plus bias [K] when given. Stages: "pad" (the input, zero-padded to whole tiles, as
// [N, Hp, Wp, C] so that channels are contiguous), "wino_v" (the transformed input
// tiles [16, P, C], P = N·TH·TW), "matmul" (M = V·U per t: batch t, rows P, columns K,
// reduction C — the form of MatMulReduction) and "wino_y" (the output transform, bias
// added, in the output layout).
func ConvWinograd(x, u, bias *te.Tensor, a WinogradAttrs) (*te.Tensor, error) {
	ext, err := Extents(x)
	if err != nil {
		return nil, err
	}
	if len(ext) == 5 && a.XBlock == ext[4] {
		ext = []int64{ext[0], ext[1] * ext[4], ext[2], ext[3]}
	}
	uext, err := Extents(u)
	if err != nil {
		return nil, err
	}
	uc, k := int64(-1), int64(0)
	switch {
	case a.NR == 0 && len(uext) == 3 && uext[0] == 16:
		uc, k = uext[1], uext[2]
	case a.NR > 0 && len(uext) == 4 && uext[0] == 16 && uext[3] == a.NR:
		uc, k = uext[2], uext[1]*a.NR
	}
	if len(ext) != 4 || uc != ext[1] {
		return nil, Unsupported("Winograd conv2d: data %v, transformed weights %v in panels of %d", ext, uext, a.NR)
	}
	n, c, h, w := ext[0], ext[1], ext[2], ext[3]
	pt, pl, pb, pr := a.Pads[0], a.Pads[1], a.Pads[2], a.Pads[3]
	oh, ow := h+pt+pb-2, w+pl+pr-2
	if oh <= 0 || ow <= 0 {
		return nil, Unsupported("Winograd conv2d: empty output %dx%d", oh, ow)
	}
	if a.OutBlock != 0 && k%a.OutBlock != 0 {
		return nil, Unsupported("Winograd conv2d: %d output channels in blocks of %d", k, a.OutBlock)
	}
	th, tw := (oh+1)/2, (ow+1)/2
	dt := x.DT
	read := func(nn, ch, y, xx loopir.Expr) loopir.Expr {
		if a.XBlock == 0 {
			return x.At(nn, ch, y, xx)
		}
		return x.At(nn, div(ch, i64(a.XBlock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(a.XBlock)))
	}
	pad := te.Compute("pad", Static(n, 2*th+2, 2*tw+2, c), func(i []loopir.Expr) loopir.Expr {
		yy, xx := sub(i[1], i64(pt)), sub(i[2], i64(pl))
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(w)))
		return te.Select(cond, read(i[0], i[3], clampIndex(yy, h), clampIndex(xx, w)), loopir.Float(0, dt))
	})
	// row a of Bᵀ as index and sign expressions of the loop variable a
	pick := func(tab [4]int64, a loopir.Expr) loopir.Expr {
		out := i64(tab[3])
		for q := 2; q >= 0; q-- {
			out = te.Select(loopir.Bin(loopir.EQ, a, i64(int64(q))), i64(tab[q]), out)
		}
		return out
	}
	sign := func(a loopir.Expr) loopir.Expr {
		out := loopir.Expr(loopir.Float(winoS2[3], dt))
		for q := 2; q >= 0; q-- {
			out = te.Select(loopir.Bin(loopir.EQ, a, i64(int64(q))), loopir.Float(winoS2[q], dt), out)
		}
		return out
	}
	v := te.Compute("wino_v", Static(16, n*th*tw, c), func(i []loopir.Expr) loopir.Expr {
		ta, tb := div(i[0], i64(4)), loopir.Bin(loopir.Mod, i[0], i64(4))
		tile := i[1]
		nn := div(tile, i64(th*tw))
		ty := mul(loopir.Bin(loopir.Mod, div(tile, i64(tw)), i64(th)), i64(2))
		tx := mul(loopir.Bin(loopir.Mod, tile, i64(tw)), i64(2))
		d := func(ri, ci loopir.Expr) loopir.Expr { return pad.At(nn, add(ty, ri), add(tx, ci), i[2]) }
		a1, a2, b1, b2 := pick(winoI1, ta), pick(winoI2, ta), pick(winoI1, tb), pick(winoI2, tb)
		first := te.Add(d(a1, b1), te.Mul(sign(tb), d(a1, b2)))
		second := te.Add(d(a2, b1), te.Mul(sign(tb), d(a2, b2)))
		return te.Add(first, te.Mul(sign(ta), second))
	})
	m, err := winogradProducts(v, u, k, a.NR)
	if err != nil {
		return nil, err
	}
	oshape := Static(n, k, oh, ow)
	if a.OutBlock != 0 {
		oshape = Static(n, k/a.OutBlock, oh, ow, a.OutBlock)
	}
	return te.Compute("wino_y", oshape, func(i []loopir.Expr) loopir.Expr {
		ch := i[1]
		if a.OutBlock != 0 {
			ch = add(mul(i[1], i64(a.OutBlock)), i[4])
		}
		y, xx := i[2], i[3]
		tile := add(mul(add(mul(i[0], i64(th)), div(y, i64(2))), i64(tw)), div(xx, i64(2)))
		r0 := loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, y, i64(2)), i64(0))
		s0 := loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, xx, i64(2)), i64(0))
		mt := func(t int64) loopir.Expr { return m.At(i64(t), tile, ch) }
		neg := func(e loopir.Expr) loopir.Expr { return sub(loopir.Float(0, dt), e) }
		// Aᵀ's rows: [1 1 1 0] for even outputs, [0 1 -1 -1] for odd ones
		row := func(q int64) loopir.Expr { // combine row q of the tile along b
			return te.Add(mt(4*q+1), te.Select(s0, te.Add(mt(4*q), mt(4*q+2)), neg(te.Add(mt(4*q+2), mt(4*q+3)))))
		}
		out := te.Add(row(1), te.Select(r0, te.Add(row(0), row(2)), neg(te.Add(row(2), row(3)))))
		if bias != nil {
			out = te.Add(out, bias.At(ch))
		}
		return out
	}), nil
}

// winogradProducts is M[t] = V[t]·U[t] for the 16 planes t, the block "matmul" of
// MatMulReduction's form (loops t, p, k, then the reduction over c); with nr, U is in
// column panels [16, K/nr, C, nr].
func winogradProducts(v, u *te.Tensor, k, nr int64) (*te.Tensor, error) {
	if nr == 0 {
		return MatMulReduction(v, u)
	}
	r := te.RAxis("k", v.Shape[2])
	return te.Compute("matmul", []loopir.Expr{v.Shape[0], v.Shape[1], i64(k)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(v.At(i[0], i[1], r.Var), u.At(i[0], div(i[2], i64(nr)), r.Var, loopir.Bin(loopir.Mod, i[2], i64(nr)))), r)
	}), nil
}
