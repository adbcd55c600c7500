package ref

// Convolution (N-D, groups, dilations, auto_pad) by im2col + gemm, and ConvTranspose by
// scattering each input pixel's contribution.

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// window describes a sliding window over the spatial dims of an N-D tensor.
type window struct {
	in, out, k, stride, dil, padBegin []int
}

// spatialGeometry resolves output sizes and begin pads (auto_pad included).
func spatialGeometry(in, k []int, strides, dils, pads []int64, autoPad string, ceil bool) (window, error) {
	sp := len(in)
	w := window{in: in, k: k}
	for i := 0; i < sp; i++ {
		s, d := int(graph.AttrOr(strides, i, 1)), int(graph.AttrOr(dils, i, 1))
		if s <= 0 || d <= 0 || k[i] <= 0 {
			return window{}, Badf("bad stride %d, dilation %d or kernel %d", s, d, k[i])
		}
		span := d*(k[i]-1) + 1
		var o, pb int
		switch autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			o = (in[i] + s - 1) / s
			total := max(0, (o-1)*s+span-in[i])
			pb = total / 2
			if autoPad == "SAME_LOWER" {
				pb = total - total/2
			}
		case "VALID":
			o = max(0, (in[i]-span)/s+1)
		case "NOTSET", "":
			pb = int(graph.AttrOr(pads, i, 0))
			num := in[i] + pb + int(graph.AttrOr(pads, i+sp, 0)) - span
			if num < 0 {
				o = 0
			} else if ceil {
				o = (num+s-1)/s + 1
				if (o-1)*s >= in[i]+pb {
					o--
				}
			} else {
				o = num/s + 1
			}
		default:
			return window{}, Badf("unknown auto_pad %q", autoPad)
		}
		w.out = append(w.out, o)
		w.stride = append(w.stride, s)
		w.dil = append(w.dil, d)
		w.padBegin = append(w.padBegin, pb)
	}
	return w, nil
}

func intsOf(s tensor.Shape) []int { return append([]int{}, s...) }

func nnConv(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ConvAttrs](n)
	x, w := in[0], in[1]
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, Badf("input %v and weight %v do not fit a convolution", x.Shape, w.Shape)
	}
	var b *tensor.Tensor
	if len(in) > 2 {
		b = in[2]
	}
	if x.DType == tensor.Float64 {
		out, err := convTyped[float64](x.Shape, w.Shape, x.Float64s(), w.Float64s(), biasOf[float64](b), a)
		if err != nil {
			return nil, err
		}
		return one(tensor.MustFromSlice(out.shape, out.data)), nil
	}
	out, err := convTyped[float32](x.Shape, w.Shape, f32s(x), f32s(w), biasOf[float32](b), a)
	if err != nil {
		return nil, err
	}
	if x.DType == tensor.Float32 {
		return one(tensor.MustFromSlice(out.shape, out.data)), nil
	}
	return one(tensor.FromFloat64s(x.DType, out.shape, widen(out.data))), nil
}

type typed[T any] struct {
	shape tensor.Shape
	data  []T
}

func f32s(t *tensor.Tensor) []float32 {
	if d, ok := t.Data.([]float32); ok {
		return d
	}
	v := t.Float64s()
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func widen[T float](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func biasOf[T float](b *tensor.Tensor) []T {
	if b == nil {
		return nil
	}
	v := b.Float64s()
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = T(x)
	}
	return out
}

func convTyped[T float](xs, ws tensor.Shape, x, w, bias []T, a *graph.ConvAttrs) (typed[T], error) {
	nb, c := xs[0], xs[1]
	m, cg := ws[0], ws[1]
	group := int(a.Group)
	if group <= 0 || c != cg*group || m%group != 0 {
		return typed[T]{}, Badf("channels %d, weight %v and group %d do not agree", c, ws, group)
	}
	k := intsOf(ws[2:])
	for i, ks := range a.KernelShape {
		if i < len(k) && int(ks) != k[i] {
			return typed[T]{}, Badf("kernel_shape %v does not match weight %v", a.KernelShape, ws)
		}
	}
	win, err := spatialGeometry(intsOf(xs[2:]), k, a.Strides, a.Dilations, a.Pads, a.AutoPad, false)
	if err != nil {
		return typed[T]{}, err
	}
	if bias != nil && len(bias) != m {
		return typed[T]{}, Badf("bias has %d elements for %d output channels", len(bias), m)
	}
	P := tensor.Shape(win.out).NumElements()
	kprod := tensor.Shape(k).NumElements()
	K := cg * kprod
	mg := m / group
	inSp := tensor.Shape(win.in).NumElements()
	outShape := append(tensor.Shape{nb, m}, win.out...)
	out := make([]T, outShape.NumElements())
	col := make([]T, K*P)
	for bi := 0; bi < nb; bi++ {
		for g := 0; g < group; g++ {
			xg := x[(bi*c+g*cg)*inSp : (bi*c+(g+1)*cg)*inSp]
			im2col(xg, cg, win, col)
			og := out[(bi*m+g*mg)*P : (bi*m+(g+1)*mg)*P]
			gemm(mg, P, K, w[g*mg*K:(g+1)*mg*K], K, col, P, og, P, false)
		}
	}
	if bias != nil {
		for bi := 0; bi < nb; bi++ {
			for o := 0; o < m; o++ {
				row := out[(bi*m+o)*P : (bi*m+o+1)*P]
				for j := range row {
					row[j] += bias[o]
				}
			}
		}
	}
	return typed[T]{outShape, out}, nil
}

// im2col fills col[(ch*kprod+kp)*P + p] with the input value under kernel position kp
// for output position p (zero in padding).
func im2col[T float](x []T, channels int, win window, col []T) {
	sp := len(win.in)
	P := tensor.Shape(win.out).NumElements()
	kprod := tensor.Shape(win.k).NumElements()
	inSp := tensor.Shape(win.in).NumElements()
	inStr := tensor.Shape(win.in).Strides()
	parallelRows(channels, kprod*P, func(lo, hi int) {
		kidx := make([]int, sp)
		oidx := make([]int, sp)
		for ch := lo; ch < hi; ch++ {
			xc := x[ch*inSp : (ch+1)*inSp]
			for kp := 0; kp < kprod; kp++ {
				rem := kp
				for d := sp - 1; d >= 0; d-- {
					kidx[d] = rem % win.k[d]
					rem /= win.k[d]
				}
				row := col[(ch*kprod+kp)*P : (ch*kprod+kp+1)*P]
				if sp == 2 {
					im2colRow2D(xc, win, kidx, row)
					continue
				}
				for d := range oidx {
					oidx[d] = 0
				}
				for p := 0; p < P; p++ {
					off, ok := 0, true
					for d := 0; d < sp; d++ {
						ii := oidx[d]*win.stride[d] + kidx[d]*win.dil[d] - win.padBegin[d]
						if ii < 0 || ii >= win.in[d] {
							ok = false
							break
						}
						off += ii * inStr[d]
					}
					if ok {
						row[p] = xc[off]
					} else {
						row[p] = 0
					}
					for d := sp - 1; d >= 0; d-- {
						oidx[d]++
						if oidx[d] < win.out[d] {
							break
						}
						oidx[d] = 0
					}
				}
			}
		}
	})
}

func im2colRow2D[T float](xc []T, win window, kidx []int, row []T) {
	H, W := win.in[0], win.in[1]
	OH, OW := win.out[0], win.out[1]
	sh, sw := win.stride[0], win.stride[1]
	dy, dx := kidx[0]*win.dil[0]-win.padBegin[0], kidx[1]*win.dil[1]-win.padBegin[1]
	p := 0
	for oy := 0; oy < OH; oy++ {
		iy := oy*sh + dy
		if iy < 0 || iy >= H {
			clear(row[p : p+OW])
			p += OW
			continue
		}
		src := xc[iy*W : (iy+1)*W]
		for ox := 0; ox < OW; ox++ {
			ix := ox*sw + dx
			if ix >= 0 && ix < W {
				row[p] = src[ix]
			} else {
				row[p] = 0
			}
			p++
		}
	}
}
