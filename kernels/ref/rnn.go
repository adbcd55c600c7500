package ref

// LSTM, GRU and RNN, step by step in float64, following the ONNX equations (gate orders
// LSTM iofc, GRU zrh; peepholes iof), with sequence_lens, both directions and layout 1.

import (
	"math"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func rnnKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{graph.OpLSTM: T(rnnRun), graph.OpGRU: T(rnnRun), graph.OpRNN: T(rnnRun)}
}

type rnnAct func(float64) float64

// rnnActivation builds a named activation with its optional alpha/beta.
func rnnActivation(name string, alpha, beta *float64) (rnnAct, error) {
	get := func(p *float64, def float64) float64 {
		if p != nil {
			return *p
		}
		return def
	}
	switch strings.ToLower(name) {
	case "sigmoid":
		return sigmoid, nil
	case "tanh":
		return math.Tanh, nil
	case "relu":
		return func(x float64) float64 { return math.Max(x, 0) }, nil
	case "affine":
		al, be := get(alpha, 1), get(beta, 0)
		return func(x float64) float64 { return al*x + be }, nil
	case "leakyrelu":
		al := get(alpha, 0.01)
		return func(x float64) float64 {
			if x < 0 {
				return al * x
			}
			return x
		}, nil
	case "thresholdedrelu":
		al := get(alpha, 1)
		return func(x float64) float64 {
			if x > al {
				return x
			}
			return 0
		}, nil
	case "scaledtanh":
		al, be := get(alpha, 1), get(beta, 1)
		return func(x float64) float64 { return al * math.Tanh(be*x) }, nil
	case "hardsigmoid":
		al, be := get(alpha, 0.2), get(beta, 0.5)
		return func(x float64) float64 { return math.Max(0, math.Min(1, al*x+be)) }, nil
	case "elu":
		al := get(alpha, 1)
		return func(x float64) float64 {
			if x < 0 {
				return al * (math.Exp(x) - 1)
			}
			return x
		}, nil
	case "softsign":
		return func(x float64) float64 { return x / (1 + math.Abs(x)) }, nil
	case "softplus":
		return softplus, nil
	}
	return nil, Badf("unknown activation %q", name)
}

func rnnRun(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.RNNAttrs](n)
	gates, nAct := 1, 1
	defaults := []string{"Tanh"}
	switch n.Op {
	case graph.OpLSTM:
		gates, nAct, defaults = 4, 3, []string{"Sigmoid", "Tanh", "Tanh"}
	case graph.OpGRU:
		gates, nAct, defaults = 3, 2, []string{"Sigmoid", "Tanh"}
	}
	dirs := 1
	if a.Direction == "bidirectional" {
		dirs = 2
	}
	get := func(i int) *tensor.Tensor {
		if i < len(in) {
			return in[i]
		}
		return nil
	}
	x, w, r := in[0], in[1], in[2]
	if len(x.Shape) != 3 || len(w.Shape) != 3 || len(r.Shape) != 3 {
		return nil, Badf("X, W and R must be rank 3")
	}
	xv := x.Float64s()
	seq, batch, isz := x.Shape[0], x.Shape[1], x.Shape[2]
	if a.Layout != 0 {
		seq, batch = x.Shape[1], x.Shape[0]
	}
	hid := r.Shape[2]
	if w.Shape[0] != dirs || w.Shape[1] != gates*hid || w.Shape[2] != isz || r.Shape[1] != gates*hid {
		return nil, Badf("W %v / R %v do not fit %d directions, %d gates, hidden %d, input %d", w.Shape, r.Shape, dirs, gates, hid, isz)
	}
	xAt := func(t, b, i int) float64 {
		if a.Layout != 0 {
			return xv[(b*seq+t)*isz+i]
		}
		return xv[(t*batch+b)*isz+i]
	}
	acts := a.Activations
	if acts == nil {
		for d := 0; d < dirs; d++ {
			acts = append(acts, defaults...)
		}
	}
	if len(acts) != nAct*dirs {
		return nil, Badf("%d activations for %d directions", len(acts), dirs)
	}
	fns := make([]rnnAct, len(acts))
	for i, name := range acts {
		var al, be *float64
		if i < len(a.ActivationAlpha) {
			v := float64(a.ActivationAlpha[i])
			al = &v
		}
		if i < len(a.ActivationBeta) {
			v := float64(a.ActivationBeta[i])
			be = &v
		}
		f, err := rnnActivation(name, al, be)
		if err != nil {
			return nil, err
		}
		fns[i] = f
	}
	lens := make([]int, batch)
	for i := range lens {
		lens[i] = seq
	}
	if sl := get(4); sl != nil {
		for i, v := range sl.Int64s() {
			if i < batch {
				if v < 0 || v > int64(seq) {
					return nil, Badf("sequence length %d out of range", v)
				}
				lens[i] = int(v)
			}
		}
	}
	wv, rv := w.Float64s(), r.Float64s()
	var bv []float64
	if b := get(3); b != nil {
		bv = b.Float64s()
	}
	stateAt := func(t *tensor.Tensor, d, b, h int) float64 {
		if t == nil {
			return 0
		}
		v := t.Float64s()
		if a.Layout != 0 {
			return v[(b*dirs+d)*hid+h]
		}
		return v[(d*batch+b)*hid+h]
	}
	var p []float64
	if pt := get(7); pt != nil && n.Op == graph.OpLSTM {
		p = pt.Float64s()
	}
	clip := float64(a.Clip)
	clipf := func(v float64) float64 {
		if clip > 0 {
			return math.Max(-clip, math.Min(clip, v))
		}
		return v
	}
	y := make([]float64, seq*dirs*batch*hid)
	yh := make([]float64, dirs*batch*hid)
	yc := make([]float64, dirs*batch*hid)
	yIdx := func(t, d, b, h int) int {
		if a.Layout != 0 {
			return ((b*seq+t)*dirs+d)*hid + h
		}
		return ((t*dirs+d)*batch+b)*hid + h
	}
	hIdx := func(d, b, h int) int {
		if a.Layout != 0 {
			return (b*dirs+d)*hid + h
		}
		return (d*batch+b)*hid + h
	}
	// pre-activation of gate g for hidden unit h: W x + R hPrev + biases
	for d := 0; d < dirs; d++ {
		reverse := a.Direction == "reverse" || d == 1
		f := fns[d*nAct : (d+1)*nAct]
		W := wv[d*gates*hid*isz : (d+1)*gates*hid*isz]
		R := rv[d*gates*hid*hid : (d+1)*gates*hid*hid]
		bias := func(g, h int) (float64, float64) {
			if bv == nil {
				return 0, 0
			}
			base := d * 2 * gates * hid
			return bv[base+g*hid+h], bv[base+(gates+g)*hid+h]
		}
		for b := 0; b < batch; b++ {
			h := make([]float64, hid)
			c := make([]float64, hid)
			for k := range h {
				h[k] = stateAt(get(5), d, b, k)
				c[k] = stateAt(get(6), d, b, k)
			}
			xw := make([]float64, gates*hid)
			hr := make([]float64, gates*hid)
			for s := 0; s < lens[b]; s++ {
				t := s
				if reverse {
					t = lens[b] - 1 - s
				}
				for g := 0; g < gates*hid; g++ {
					sx, sh := 0.0, 0.0
					for i := 0; i < isz; i++ {
						sx += W[g*isz+i] * xAt(t, b, i)
					}
					for i := 0; i < hid; i++ {
						sh += R[g*hid+i] * h[i]
					}
					xw[g], hr[g] = sx, sh
				}
				nh := make([]float64, hid)
				switch n.Op {
				case graph.OpLSTM:
					for k := 0; k < hid; k++ {
						pre := func(g int) float64 {
							wb, rb := bias(g, k)
							return xw[g*hid+k] + hr[g*hid+k] + wb + rb
						}
						peep := func(g int, cv float64) float64 {
							if p == nil {
								return 0
							}
							return p[d*3*hid+g*hid+k] * cv
						}
						ig := f[0](clipf(pre(0) + peep(0, c[k])))
						fg := f[0](clipf(pre(2) + peep(2, c[k])))
						if a.InputForget != 0 {
							fg = 1 - ig
						}
						cg := f[1](clipf(pre(3)))
						cn := fg*c[k] + ig*cg
						og := f[0](clipf(pre(1) + peep(1, cn)))
						c[k] = cn
						nh[k] = og * f[2](cn)
					}
				case graph.OpGRU:
					// reset gates first: without linear_before_reset they gate the state
					// before it is multiplied by Rh
					rg := make([]float64, hid)
					for k := 0; k < hid; k++ {
						wr, rr := bias(1, k)
						rg[k] = f[0](clipf(xw[hid+k] + hr[hid+k] + wr + rr))
					}
					for k := 0; k < hid; k++ {
						wz, rz := bias(0, k)
						wh, rh := bias(2, k)
						z := f[0](clipf(xw[k] + hr[k] + wz + rz))
						var recur float64
						if a.LinearBeforeReset != 0 {
							recur = rg[k] * (hr[2*hid+k] + rh)
						} else {
							for i := 0; i < hid; i++ {
								recur += R[(2*hid+k)*hid+i] * rg[i] * h[i]
							}
							recur += rh
						}
						ht := f[1](clipf(xw[2*hid+k] + recur + wh))
						nh[k] = (1-z)*ht + z*h[k]
					}
				default:
					for k := 0; k < hid; k++ {
						wb, rb := bias(0, k)
						nh[k] = f[0](clipf(xw[k] + hr[k] + wb + rb))
					}
				}
				h = nh
				for k := 0; k < hid; k++ {
					y[yIdx(t, d, b, k)] = h[k]
				}
			}
			for k := 0; k < hid; k++ {
				yh[hIdx(d, b, k)] = h[k]
				yc[hIdx(d, b, k)] = c[k]
			}
		}
	}
	yShape := tensor.Shape{seq, dirs, batch, hid}
	hShape := tensor.Shape{dirs, batch, hid}
	if a.Layout != 0 {
		yShape = tensor.Shape{batch, seq, dirs, hid}
		hShape = tensor.Shape{batch, dirs, hid}
	}
	outs := []*tensor.Tensor{
		tensor.FromFloat64s(x.DType, yShape, y),
		tensor.FromFloat64s(x.DType, hShape, yh),
		tensor.FromFloat64s(x.DType, hShape, yc),
	}
	return outs[:len(n.Outputs)], nil
}
