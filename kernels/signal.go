package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Signal ops as direct sums: DFT, STFT (frames × window × DFT) and MelWeightMatrix
// (triangles from its scalar operands). Sums run in float64, as the reference does,
// and the result is narrowed once.

func signalComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpDFT:             computeDFT,
		graph.OpSTFT:            computeSTFT,
		graph.OpMelWeightMatrix: computeMelWeightMatrix,
	}
}

// imm64 is a float64 constant; asFloat64 converts e to float64; cmpExpr and bothExpr
// build a comparison and a conjunction.
func imm64(v float64) loopir.Expr                           { return loopir.Float(v, tensor.Float64) }
func asFloat64(e loopir.Expr) loopir.Expr                   { return asType(tensor.Float64, e) }
func cmpExpr(op loopir.BinOp, a, b loopir.Expr) loopir.Expr { return loopir.Bin(op, a, b) }
func bothExpr(a, b loopir.Expr) loopir.Expr                 { return loopir.Bin(loopir.And, a, b) }

// clampExpr clamps the index v into [0, n) for an extent expression n.
func clampExpr(v, n loopir.Expr) loopir.Expr {
	return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, v, sub(n, i64(1))), i64(0))
}

// dftTerm is one term of a DFT sum for output part c (0 real, 1 imaginary): the sample
// xr + i·xi (xi nil for a real signal) times e^{sign·2πi·k·t/n}, the angle from
// (k·t) mod n so that long transforms keep their precision.
func dftTerm(xr, xi, k, t, n, c loopir.Expr, sign float64) loopir.Expr {
	kt := loopir.Bin(loopir.Mod, mul(k, t), n)
	th := te.Div(te.Mul(imm64(sign*2*math.Pi), asFloat64(kt)), asFloat64(n))
	cos := &loopir.Call{Fn: loopir.Cos, Args: []loopir.Expr{th}}
	sin := &loopir.Call{Fn: loopir.Sin, Args: []loopir.Expr{th}}
	re, im := te.Mul(xr, cos), te.Mul(xr, sin)
	if xi != nil {
		re, im = te.Sub(re, te.Mul(xi, sin)), te.Add(im, te.Mul(xi, cos))
	}
	return te.Select(cmpExpr(loopir.EQ, c, i64(0)), re, im)
}

// twiddles is the table e^{-2πi·m/n} for m < n, [n, 2] (cosine, sine) in float64, when
// n is a constant: a transform reads its entry (k·t) mod n instead of computing a cosine
// and a sine for every term (frames × bins × samples of them in an STFT, where the table
// has n entries). nil for a run-time n.
func twiddles(name string, n loopir.Expr) *te.Tensor {
	c, ok := n.(*loopir.IntImm)
	if !ok {
		return nil
	}
	return te.Compute(name+"_twiddle", []loopir.Expr{c, i64(2)}, func(i []loopir.Expr) loopir.Expr {
		th := te.Div(te.Mul(imm64(-2*math.Pi), asFloat64(i[0])), asFloat64(c))
		cos := &loopir.Call{Fn: loopir.Cos, Args: []loopir.Expr{th}}
		sin := &loopir.Call{Fn: loopir.Sin, Args: []loopir.Expr{th}}
		return te.Select(cmpExpr(loopir.EQ, i[1], i64(0)), cos, sin)
	})
}

// twiddleTerm is dftTerm with the factor e^{-2πi·m/n} read from a twiddles table at m.
func twiddleTerm(xr, xi loopir.Expr, tw *te.Tensor, m, c loopir.Expr) loopir.Expr {
	cos, sin := tw.At(m, i64(0)), tw.At(m, i64(1))
	re, im := te.Mul(xr, cos), te.Mul(xr, sin)
	if xi != nil {
		re, im = te.Sub(re, te.Mul(xi, sin)), te.Add(im, te.Mul(xi, cos))
	}
	return te.Select(cmpExpr(loopir.EQ, c, i64(0)), re, im)
}

// complexParts is the extent of a signal's trailing axis, 1 (real) or 2 (complex).
func complexParts(x *te.Tensor) (int64, error) {
	p, ok := x.Shape[len(x.Shape)-1].(*loopir.IntImm)
	if !ok || (p.V != 1 && p.V != 2) {
		return 0, Unsupported("a signal whose last axis is %v, not 1 or 2", x.Shape[len(x.Shape)-1])
	}
	return p.V, nil
}

// computeDFT is out[..., k, ..., c] = Σ_{t < min(L, N)} x[..., t, ...]·e^{∓2πi·k·t/N}
// (divided by N when inverse) over the bins k < N (N/2+1 when onesided), the output's
// extents those of its type (bound on the host when N is a run-time dft_length). A
// dft_length known only at run time is read by the kernel, which then sums over the
// signal's L samples with the terms past N zero. A run-time axis has no kernel.
func computeDFT(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	if !plainFloat(x.DT) || r < 2 {
		return nil, Unsupported("DFT of %v of rank %d", x.DT, r)
	}
	parts, err := complexParts(x)
	if err != nil {
		return nil, err
	}
	axis, ok, err := graph.DFTAxis(n, r)
	if err != nil || !ok {
		return nil, Unsupported("DFT with a run-time axis")
	}
	a := attrs[graph.DFTAttrs](n)
	length := x.Shape[axis]
	size, used, guard := length, length, false
	if len(in) > 1 && in[1].Present() {
		if !in[1].T.DT.IsInt() {
			return nil, Unsupported("DFT with a dft_length of %v", in[1].T.DT)
		}
		size = asType(tensor.Int64, knownScalar(n, in, 1, tensor.Int64))
		l, lok := length.(*loopir.IntImm)
		switch s, sok := size.(*loopir.IntImm); {
		case lok && sok:
			used = i64(min(l.V, s.V))
		case in[1].Const != nil:
			used = loopir.Bin(loopir.Min, length, size)
		default: // read at run time: every sample, the ones past N weighing 0
			guard = true
		}
		if _, static := size.(*loopir.IntImm); !static {
			size = loopir.Bin(loopir.Max, size, i64(1))
		}
	}
	shape, err := genShape(n, in, x.DT)
	if err != nil {
		return nil, err
	}
	sign := -1.0
	if a.Inverse != 0 {
		sign = 1
	}
	t := te.RAxis("dft_t", used)
	acc := te.Compute("dft_sum", shape, func(i []loopir.Expr) loopir.Expr {
		idx := append([]loopir.Expr{}, i...)
		idx[axis], idx[r-1] = t.Var, i64(0)
		xr := asFloat64(x.At(idx...))
		var xi loopir.Expr
		if parts == 2 {
			idx2 := append([]loopir.Expr{}, idx...)
			idx2[r-1] = i64(1)
			xi = asFloat64(x.At(idx2...))
		}
		term := dftTerm(xr, xi, i[axis], t.Var, size, i[r-1], sign)
		if guard {
			term = te.Select(cmpExpr(loopir.LT, t.Var, size), term, imm64(0))
		}
		return te.Sum(term, t)
	})
	out := te.Compute("dft", shape, func(i []loopir.Expr) loopir.Expr {
		v := acc.At(i...)
		if a.Inverse != 0 {
			v = te.Div(v, asFloat64(size))
		}
		return asType(x.DT, v)
	})
	return []*te.Tensor{out}, nil
}

// computeSTFT is out[b, f, k, c] = Σ_{t < N} x[b, f·step + t]·w[t]·e^{-2πi·k·t/N} with N
// the frame length (frame_length, else the window's length, else the signal's) and the
// frame count and bins the output's extents (the host shape function binds them when
// step or frame_length is a run-time value). A run-time frame_length sums over the
// signal's length with the terms past N zero.
func computeSTFT(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainFloat(x.DT) || len(x.Shape) != 3 {
		return nil, Unsupported("STFT of %v of rank %d", x.DT, len(x.Shape))
	}
	parts, err := complexParts(x)
	if err != nil {
		return nil, err
	}
	if !in[1].T.DT.IsInt() || (len(in) > 3 && in[3].Present() && !in[3].T.DT.IsInt()) {
		return nil, Unsupported("STFT with non-integer frame_step or frame_length")
	}
	shape, err := genShape(n, in, x.DT)
	if err != nil {
		return nil, err
	}
	l := x.Shape[1]
	step := asType(tensor.Int64, knownScalar(n, in, 1, tensor.Int64))
	var win *te.Tensor
	if len(in) > 2 && in[2].Present() {
		win = in[2].T
		if len(win.Shape) != 1 || !plainFloat(win.DT) {
			return nil, Unsupported("STFT window of %v%v", win.DT, win.Shape)
		}
	}
	size, extent := l, l
	switch {
	case len(in) > 3 && in[3].Present():
		size = asType(tensor.Int64, knownScalar(n, in, 3, tensor.Int64))
		if _, known := graph.KnownDims(n, 3); known || in[3].Const != nil {
			extent = size
		}
		if win != nil {
			extent = win.Shape[0] // the host checked that it is the frame length
		}
	case win != nil:
		size, extent = win.Shape[0], win.Shape[0]
	}
	size = loopir.Bin(loopir.Max, size, i64(1))
	t := te.RAxis("stft_t", extent)
	tw := twiddles("stft", size)
	acc := te.Compute("stft_sum", shape, func(i []loopir.Expr) loopir.Expr {
		pos := clampExpr(add(mul(i[1], step), t.Var), l)
		w := imm64(1)
		if win != nil {
			w = asFloat64(win.At(t.Var))
		}
		xr := te.Mul(w, asFloat64(x.At(i[0], pos, i64(0))))
		var xi loopir.Expr
		if parts == 2 {
			xi = te.Mul(w, asFloat64(x.At(i[0], pos, i64(1))))
		}
		var term loopir.Expr
		if tw != nil {
			term = twiddleTerm(xr, xi, tw, loopir.Bin(loopir.Mod, mul(i[2], t.Var), size), i[3])
		} else {
			term = dftTerm(xr, xi, i[2], t.Var, size, i[3], -1)
		}
		if extent != size {
			term = te.Select(cmpExpr(loopir.LT, t.Var, size), term, imm64(0))
		}
		return te.Sum(term, t)
	})
	out := te.Compute("stft", shape, func(i []loopir.Expr) loopir.Expr { return asType(x.DT, acc.At(i...)) })
	return []*te.Tensor{out}, nil
}

// computeMelWeightMatrix is the [dft_length/2+1, num_mel_bins] matrix of triangles:
// column i rises from bin b[i] to b[i+1] and falls to b[i+2], with b the
// num_mel_bins+2 corners (the mel scale 2595·log10(1 + f/700) from the lower to the
// upper edge in num_mel_bins+2 equal steps, back to hertz, as the bin
// ⌊(dft_length+1)·f / sample_rate⌋) computed per element in float64 from the scalar
// operands (constants, or read at run time: the output's extents are then
// bound by the host). Corners past the matrix clip their triangles (the reference
// refuses them).
func computeMelWeightMatrix(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	dt := tensor.DType(attrs[graph.MelWeightMatrixAttrs](n).OutputDatatype)
	if !dt.IsNumeric() || halfFloat(dt) {
		return nil, Unsupported("MelWeightMatrix to %v", dt)
	}
	for i := range 5 {
		if v := in[i].T; len(v.Shape) > 1 || (len(v.Shape) == 1 && !isOne(v.Shape[0])) || (i < 3 && !v.DT.IsInt()) || (i >= 3 && !plainFloat(v.DT)) {
			return nil, Unsupported("MelWeightMatrix operand %d of %v%v", i, v.DT, v.Shape)
		}
	}
	shape, err := genShape(n, in, dt)
	if err != nil {
		return nil, err
	}
	operand := func(i int) loopir.Expr { return asFloat64(knownScalar(n, in, i, tensor.Float64)) }
	mel, dft, rate, lo, hi := operand(0), operand(1), operand(2), operand(3), operand(4)
	toMel := func(f loopir.Expr) loopir.Expr {
		return te.Mul(imm64(2595/math.Ln10), te.Log(te.Add(imm64(1), te.Div(f, imm64(700)))))
	}
	loMel := toMel(lo)
	step := te.Div(te.Sub(toMel(hi), loMel), te.Add(mel, imm64(2)))
	corner := func(i loopir.Expr) loopir.Expr {
		m := te.Add(te.Mul(asFloat64(i), step), loMel)
		hz := te.Mul(imm64(700), te.Sub(te.Pow(imm64(10), te.Div(m, imm64(2595))), imm64(1)))
		return floatToInt(te.Floor(te.Div(te.Mul(te.Add(dft, imm64(1)), hz), rate)), tensor.Int64)
	}
	out := te.Compute("mel_weight_matrix", shape, func(i []loopir.Expr) loopir.Expr {
		j, c := i[0], i[1]
		left, center, right := corner(c), corner(add(c, i64(1))), corner(add(c, i64(2)))
		ratio := func(num, den loopir.Expr) loopir.Expr { return te.Div(asFloat64(num), asFloat64(den)) }
		falling := bothExpr(cmpExpr(loopir.GT, right, center), bothExpr(cmpExpr(loopir.GE, j, center), cmpExpr(loopir.LT, j, right)))
		rising := bothExpr(cmpExpr(loopir.LT, left, center), bothExpr(cmpExpr(loopir.GE, j, left), cmpExpr(loopir.LE, j, center)))
		peak := bothExpr(cmpExpr(loopir.EQ, left, center), cmpExpr(loopir.EQ, j, center))
		v := te.Select(falling, ratio(sub(right, j), sub(right, center)),
			te.Select(rising, ratio(sub(j, left), sub(center, left)),
				te.Select(peak, imm64(1), imm64(0))))
		if dt.IsFloat() {
			return asType(dt, v)
		}
		return floatToInt(v, dt)
	})
	return []*te.Tensor{out}, nil
}
