package ref

// Matrix products and pooling; convolutions are in nn_conv.go.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func nnKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpConv:              T(nnConv),
		graph.OpConvInteger:       T(nnConvInteger),
		graph.OpConvTranspose:     T(nnConvTranspose),
		graph.OpGemm:              T(nnGemm),
		graph.OpMatMul:            T(nnMatMul),
		graph.OpMatMulInteger:     T(nnMatMulInteger),
		graph.OpMaxPool:           T(nnPool),
		graph.OpAveragePool:       T(nnPool),
		graph.OpLpPool:            T(nnPool),
		graph.OpGlobalAveragePool: T(nnGlobalPool),
		graph.OpGlobalMaxPool:     T(nnGlobalPool),
		graph.OpGlobalLpPool:      T(nnGlobalPool),
	}
}

func nnGemm(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.GemmAttrs](n)
	A, B := in[0], in[1]
	if len(A.Shape) != 2 || len(B.Shape) != 2 {
		return nil, Badf("Gemm takes matrices, got %v and %v", A.Shape, B.Shape)
	}
	if a.TransA != 0 {
		A = transpose2D(A)
	}
	if a.TransB != 0 {
		B = transpose2D(B)
	}
	m, k, n2 := A.Shape[0], A.Shape[1], B.Shape[1]
	if B.Shape[0] != k {
		return nil, Badf("inner dimensions %d and %d differ", k, B.Shape[0])
	}
	out := make([]float64, m*n2)
	gemm(m, n2, k, A.Float64s(), k, B.Float64s(), n2, out, n2, false)
	if a.Alpha != 1 {
		for i := range out {
			out[i] *= float64(a.Alpha)
		}
	}
	shape := tensor.Shape{m, n2}
	if len(in) > 2 && in[2] != nil && a.Beta != 0 {
		if _, err := tensor.BroadcastShapes(shape, in[2].Shape); err != nil {
			return nil, Badf("C %v does not broadcast to %v", in[2].Shape, shape)
		}
		cv := in[2].Float64s()
		for i, j := range broadcastIndex(shape, in[2].Shape) {
			out[i] += float64(a.Beta) * cv[j]
		}
	}
	return one(tensor.FromFloat64s(in[0].DType, shape, out)), nil
}

func transpose2D(t *tensor.Tensor) *tensor.Tensor {
	r, c := t.Shape[0], t.Shape[1]
	idx := make([]int, r*c)
	for i := 0; i < c; i++ {
		for j := 0; j < r; j++ {
			idx[i*r+j] = j*c + i
		}
	}
	return take(t, tensor.Shape{c, r}, idx)
}

// matmulShapes applies numpy matmul rules: it returns the batch shape, m, k, n, and the
// output shape.
func matmulShapes(as, bs tensor.Shape) (batch tensor.Shape, m, k, n int, out tensor.Shape, err error) {
	if len(as) == 0 || len(bs) == 0 {
		return nil, 0, 0, 0, nil, Badf("MatMul of a scalar")
	}
	a2, b2 := as, bs
	if len(as) == 1 {
		a2 = tensor.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		b2 = tensor.Shape{bs[0], 1}
	}
	m, k, n = a2[len(a2)-2], a2[len(a2)-1], b2[len(b2)-1]
	if b2[len(b2)-2] != k {
		return nil, 0, 0, 0, nil, Badf("inner dimensions %d and %d differ", k, b2[len(b2)-2])
	}
	batch, err = tensor.BroadcastShapes(a2[:len(a2)-2], b2[:len(b2)-2])
	if err != nil {
		return nil, 0, 0, 0, nil, Badf("%v", err)
	}
	out = batch.Clone()
	if len(as) > 1 {
		out = append(out, m)
	}
	if len(bs) > 1 {
		out = append(out, n)
	}
	return batch, m, k, n, out, nil
}

func matmulTyped[T float](as, bs tensor.Shape, a, b []T) ([]T, tensor.Shape, error) {
	batch, m, k, n, outShape, err := matmulShapes(as, bs)
	if err != nil {
		return nil, nil, err
	}
	ab := tensor.Shape{1}
	if len(as) > 2 {
		ab = as[:len(as)-2]
	}
	bb := tensor.Shape{1}
	if len(bs) > 2 {
		bb = bs[:len(bs)-2]
	}
	nbatch := batch.NumElements()
	ai, bi := broadcastIndex(batch, ab), broadcastIndex(batch, bb)
	if len(batch) == 0 {
		ai, bi = []int{0}, []int{0}
	}
	out := make([]T, nbatch*m*n)
	for i := 0; i < nbatch; i++ {
		gemm(m, n, k, a[ai[i]*m*k:], k, b[bi[i]*k*n:], n, out[i*m*n:], n, false)
	}
	return out, outShape, nil
}

func nnMatMul(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b := in[0], in[1]
	if a.DType == tensor.Float32 && b.DType == tensor.Float32 {
		out, shape, err := matmulTyped(a.Shape, b.Shape, a.Data.([]float32), b.Data.([]float32))
		if err != nil {
			return nil, err
		}
		return one(tensor.MustFromSlice(shape, out)), nil
	}
	out, shape, err := matmulTyped(a.Shape, b.Shape, a.Float64s(), b.Float64s())
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(a.DType, shape, out)), nil
}

// zeroPointed subtracts an optional zero point (scalar, or per row/column along axis).
func zeroPointed(t, zp *tensor.Tensor, axis int) []float64 {
	v := t.Float64s()
	if zp == nil {
		return v
	}
	z := zp.Float64s()
	if len(z) == 1 {
		for i := range v {
			v[i] -= z[0]
		}
		return v
	}
	inner := t.Shape[axis+1:].NumElements()
	for i := range v {
		v[i] -= z[(i/inner)%t.Shape[axis]]
	}
	return v
}

func nnMatMulInteger(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a, b := in[0], in[1]
	var za, zb *tensor.Tensor
	if len(in) > 2 {
		za = in[2]
	}
	if len(in) > 3 {
		zb = in[3]
	}
	av := zeroPointed(a, za, max(len(a.Shape)-2, 0))
	bv := zeroPointed(b, zb, len(b.Shape)-1)
	if zb != nil && zb.Len() > 1 {
		// per-column zero point of b: subtract along the last axis
		bv = b.Float64s()
		z := zb.Float64s()
		cols := b.Shape[len(b.Shape)-1]
		for i := range bv {
			bv[i] -= z[i%cols]
		}
	}
	out, shape, err := matmulTyped(a.Shape, b.Shape, av, bv)
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(tensor.Int32, shape, out)), nil
}

func nnConvInteger(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, w := in[0], in[1]
	var zx, zw *tensor.Tensor
	if len(in) > 2 {
		zx = in[2]
	}
	if len(in) > 3 {
		zw = in[3]
	}
	xv := zeroPointed(x, zx, 1)
	wv := zeroPointed(w, zw, 0)
	out, err := convTyped[float64](x.Shape, w.Shape, xv, wv, nil, attrs[graph.ConvAttrs](n))
	if err != nil {
		return nil, err
	}
	return one(tensor.FromFloat64s(tensor.Int32, out.shape, out.data)), nil
}

func nnConvTranspose(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ConvTransposeAttrs](n)
	x, w := in[0], in[1]
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, Badf("input %v and weight %v do not fit a convolution", x.Shape, w.Shape)
	}
	nb, c := x.Shape[0], x.Shape[1]
	group := int(a.Group)
	if group <= 0 || w.Shape[0] != c || c%group != 0 {
		return nil, Badf("channels %d, weight %v and group %d do not agree", c, w.Shape, group)
	}
	mg := w.Shape[1]
	m := mg * group
	sp := len(x.Shape) - 2
	in_, k := intsOf(x.Shape[2:]), intsOf(w.Shape[2:])
	out := make([]int, sp)
	pb := make([]int, sp)
	s := make([]int, sp)
	d := make([]int, sp)
	for i := 0; i < sp; i++ {
		s[i], d[i] = int(graph.AttrOr(a.Strides, i, 1)), int(graph.AttrOr(a.Dilations, i, 1))
		op := int(graph.AttrOr(a.OutputPadding, i, 0))
		full := s[i]*(in_[i]-1) + op + (k[i]-1)*d[i] + 1
		switch {
		case len(a.OutputShape) == sp || a.AutoPad == "SAME_UPPER" || a.AutoPad == "SAME_LOWER":
			target := in_[i] * s[i]
			if len(a.OutputShape) == sp {
				target = int(a.OutputShape[i])
			}
			total := max(0, full-target)
			pb[i] = total / 2
			if a.AutoPad == "SAME_UPPER" {
				pb[i] = total / 2
			} else if a.AutoPad == "SAME_LOWER" || len(a.OutputShape) == sp {
				pb[i] = total - total/2
				if a.AutoPad != "SAME_LOWER" {
					pb[i] = total / 2
				}
			}
			out[i] = target
		default:
			pb[i] = int(graph.AttrOr(a.Pads, i, 0))
			out[i] = full - pb[i] - int(graph.AttrOr(a.Pads, i+sp, 0))
		}
		if out[i] < 0 {
			return nil, Badf("negative output extent")
		}
	}
	xv, wv := x.Float64s(), w.Float64s()
	outShape := append(tensor.Shape{nb, m}, out...)
	res := make([]float64, outShape.NumElements())
	inSp, kSp, outSp := tensor.Shape(in_).NumElements(), tensor.Shape(k).NumElements(), tensor.Shape(out).NumElements()
	outStr := tensor.Shape(out).Strides()
	ii := make([]int, sp)
	kk := make([]int, sp)
	for b := 0; b < nb; b++ {
		for ci := 0; ci < c; ci++ {
			g := ci / (c / group)
			for p := 0; p < inSp; p++ {
				xval := xv[(b*c+ci)*inSp+p]
				if xval == 0 {
					continue
				}
				unravel(p, in_, ii)
				for q := 0; q < kSp; q++ {
					unravel(q, k, kk)
					off, ok := 0, true
					for dd := 0; dd < sp; dd++ {
						o := ii[dd]*s[dd] + kk[dd]*d[dd] - pb[dd]
						if o < 0 || o >= out[dd] {
							ok = false
							break
						}
						off += o * outStr[dd]
					}
					if !ok {
						continue
					}
					for oc := 0; oc < mg; oc++ {
						res[(b*m+g*mg+oc)*outSp+off] += xval * wv[(ci*mg+oc)*kSp+q]
					}
				}
			}
		}
	}
	if len(in) > 2 && in[2] != nil {
		bv := in[2].Float64s()
		for i := range res {
			res[i] += bv[(i/outSp)%m]
		}
	}
	return one(tensor.FromFloat64s(x.DType, outShape, res)), nil
}

func unravel(p int, shape []int, out []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		out[d] = p % shape[d]
		p /= shape[d]
	}
}

func nnPool(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.PoolAttrs](n)
	x := in[0]
	if len(x.Shape) < 3 || len(a.KernelShape) != len(x.Shape)-2 {
		return nil, Badf("kernel_shape %v for input %v", a.KernelShape, x.Shape)
	}
	k := make([]int, len(a.KernelShape))
	for i, v := range a.KernelShape {
		k[i] = int(v)
	}
	win, err := spatialGeometry(intsOf(x.Shape[2:]), k, a.Strides, a.Dilations, a.Pads, a.AutoPad, a.CeilMode != 0)
	if err != nil {
		return nil, err
	}
	sp := len(k)
	nc := x.Shape[0] * x.Shape[1]
	inSp := tensor.Shape(win.in).NumElements()
	outSp := tensor.Shape(win.out).NumElements()
	kSp := tensor.Shape(k).NumElements()
	inStr := tensor.Shape(win.in).Strides()
	xv := x.Float64s()
	res := make([]float64, nc*outSp)
	indices := make([]int64, nc*outSp)
	// padded extent for count_include_pad: the window clipped to input + explicit pads
	padEnd := make([]int, sp)
	for i := range padEnd {
		padEnd[i] = int(graph.AttrOr(a.Pads, i+sp, 0))
	}
	oi := make([]int, sp)
	ki := make([]int, sp)
	for ch := 0; ch < nc; ch++ {
		base := ch * inSp
		for p := 0; p < outSp; p++ {
			unravel(p, win.out, oi)
			best, bestAt := math.Inf(-1), -1
			sum, count, padCount := 0.0, 0, 0
			for q := 0; q < kSp; q++ {
				unravel(q, k, ki)
				off, inside, inPad := 0, true, true
				for d := 0; d < sp; d++ {
					pos := oi[d]*win.stride[d] + ki[d]*win.dil[d] - win.padBegin[d]
					if pos < 0 || pos >= win.in[d] {
						inside = false
					}
					if pos < -win.padBegin[d] || pos >= win.in[d]+padEnd[d] {
						inPad = false
					}
					off += pos * inStr[d]
				}
				if inPad {
					padCount++
				}
				if !inside {
					continue
				}
				v := xv[base+off]
				count++
				switch n.Op {
				case graph.OpMaxPool:
					if v > best || bestAt < 0 {
						best, bestAt = v, off
					}
				case graph.OpLpPool:
					sum += math.Pow(math.Abs(v), float64(a.P))
				default:
					sum += v
				}
			}
			o := ch*outSp + p
			switch n.Op {
			case graph.OpMaxPool:
				res[o] = best
				indices[o] = int64(base + bestAt)
				if a.StorageOrder != 0 && bestAt >= 0 {
					unravel(bestAt, win.in, ki)
					colMajor := 0
					mul := 1
					for d := 0; d < sp; d++ {
						colMajor += ki[d] * mul
						mul *= win.in[d]
					}
					indices[o] = int64(base + colMajor)
				}
			case graph.OpLpPool:
				res[o] = math.Pow(sum, 1/float64(a.P))
			default:
				div := count
				if a.CountIncludePad != 0 {
					div = padCount
				}
				res[o] = sum / float64(max(div, 1))
			}
		}
	}
	outShape := append(tensor.Shape{x.Shape[0], x.Shape[1]}, win.out...)
	outs := []*tensor.Tensor{tensor.FromFloat64s(x.DType, outShape, res)}
	if len(n.Outputs) > 1 {
		outs = append(outs, tensor.MustFromSlice(outShape, indices))
	}
	return outs, nil
}

func nnGlobalPool(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, Badf("input rank %d, want >= 2", len(x.Shape))
	}
	nc := x.Shape[0] * x.Shape[1]
	sp := x.Shape[2:].NumElements()
	xv := x.Float64s()
	p := 2.0
	if n.Op == graph.OpGlobalLpPool {
		p = float64(attrs[graph.LpAttrs](n).P)
	}
	res := make([]float64, nc)
	for c := 0; c < nc; c++ {
		vals := xv[c*sp : (c+1)*sp]
		switch n.Op {
		case graph.OpGlobalMaxPool:
			m := math.Inf(-1)
			for _, v := range vals {
				m = math.Max(m, v)
			}
			res[c] = m
		case graph.OpGlobalLpPool:
			s := 0.0
			for _, v := range vals {
				s += math.Pow(math.Abs(v), p)
			}
			res[c] = math.Pow(s, 1/p)
		default:
			s := 0.0
			for _, v := range vals {
				s += v
			}
			res[c] = s / float64(max(sp, 1))
		}
	}
	out := tensor.Shape{x.Shape[0], x.Shape[1]}
	for range x.Shape[2:] {
		out = append(out, 1)
	}
	return one(tensor.FromFloat64s(x.DType, out, res)), nil
}
