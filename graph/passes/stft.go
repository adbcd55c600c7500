package passes

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// STFTAsMatMul rewrites an STFT of a real float32 signal with constant frame_step,
// window and frame_length over a signal of known length into the frames times a
// constant DFT matrix:
//
//	out[b, f, k, c] = Σt x[b, f·step + t]·w[t]·(cos, −sin)(2π·k·t/N)[c]
//	                = (Gather(x[b, :], idx)[b, f, :] · D)[2k + c]
//
// with idx[f, t] = f·step + t (the frames, overlapping where step < N) and
// D[t, 2k + c] the window times the real and imaginary DFT factors, computed in float64
// and rounded once. The product runs on the packed matrix-product strategies with D
// packed at compile time; the STFT's own kernel sums frames × bins × N terms through a
// twiddle table with a modulo index per term, which no schedule vectorizes (a
// keyword spotter's one-second STFT took 47 ms where the matrix product takes about
// one). A complex signal, a run-time step, window or frame length, or a signal of
// unknown length keeps the STFT.
func STFTAsMatMul(_ *Context, m *graph.Module) error {
	names := moduleNames(m)
	replaceNodes(m, func(f *graph.Func, n *graph.Node) []*graph.Node {
		if n.Op != graph.OpSTFT {
			return nil
		}
		return stftAsMatMul(f, n, names)
	})
	return nil
}

// maxSTFTConstant bounds the elements of each constant the rewrite makes (the frame
// index [frames, N] and the DFT matrix [N, 2·bins]): a model's declared signal length
// must not make the compile allocate without bound. A larger STFT keeps its own kernel.
const maxSTFTConstant = 1 << 22

// stftGeometry is the frame step, window (nil: none) and frame length of a constant
// STFT of a real float32 signal [B, L, 1] of known L, and its frame count; ok is false
// for any other STFT.
func stftGeometry(n *graph.Node) (step int64, window []float64, size, frames int64, ok bool) {
	x := n.Input(0)
	if len(n.Outputs) != 1 || x == nil || x.Type.Kind != graph.KindTensor || x.Type.UnknownRank || x.Type.DType != tensor.Float32 || len(x.Type.Shape) != 3 {
		return 0, nil, 0, 0, false
	}
	l, lOK := x.Type.Shape[1].Value()
	if c, cOK := x.Type.Shape[2].Value(); !lOK || !cOK || c != 1 {
		return 0, nil, 0, 0, false
	}
	scalar := func(i int) (int64, bool) {
		t := n.ConstInput(i)
		if t == nil || !t.DType.IsInt() || t.Len() != 1 {
			return 0, false
		}
		return t.Int64s()[0], true
	}
	step, ok = scalar(1)
	if !ok || step < 1 {
		return 0, nil, 0, 0, false
	}
	size = l
	if n.Input(2) != nil {
		w := n.ConstInput(2)
		if w == nil || w.DType != tensor.Float32 || len(w.Shape) != 1 {
			return 0, nil, 0, 0, false
		}
		window, size = w.Float64s(), int64(w.Shape[0])
	}
	if n.Input(3) != nil {
		fl, ok := scalar(3)
		if !ok || (window != nil && fl != size) {
			return 0, nil, 0, 0, false // a mismatch is the STFT's own error to report
		}
		size = fl
	}
	if size < 1 || size > l {
		return 0, nil, 0, 0, false
	}
	return step, window, size, (l-size)/step + 1, true
}

// stftAsMatMul returns the Reshape, Gather, MatMul and Reshape replacing n, or nil.
func stftAsMatMul(f *graph.Func, n *graph.Node, names *freshNames) []*graph.Node {
	step, window, size, frames, ok := stftGeometry(n)
	a, _ := n.Attrs.(*graph.STFTAttrs)
	if !ok || a == nil {
		return nil
	}
	bins := size
	if a.Onesided != 0 {
		bins = size/2 + 1
	}
	if frames > maxSTFTConstant/size || 2*bins > maxSTFTConstant/size {
		return nil
	}
	out := n.Outputs[0]
	if os := out.Type.Shape; len(os) != 4 || !os[1].IsConst() || !os[2].IsConst() {
		return nil
	} else if v, _ := os[1].Value(); v != frames {
		return nil
	} else if v, _ := os[2].Value(); v != bins {
		return nil
	}
	x := n.Input(0)
	batch, l := x.Type.Shape[0], x.Type.Shape[1]
	konst := func(name string, t *tensor.Tensor) *graph.Value {
		v := graph.NewConst(names.fresh(name), t)
		f.Consts = append(f.Consts, v)
		return v
	}
	value := func(name string, t graph.Type, def *graph.Node) *graph.Value {
		v := &graph.Value{Name: names.fresh(name), Type: t, Def: def}
		def.Outputs = []*graph.Value{v}
		return v
	}
	base := out.Name
	if n.Name != "" {
		base = n.Name
	}
	// [B, L, 1] → [B, L] (0: the batch as it is)
	flat := &graph.Node{Op: graph.OpReshape, Name: base + "/signal", Attrs: &graph.ReshapeAttrs{},
		Inputs: []*graph.Value{x, konst(base+"_signal_shape", tensor.FromInt64s(tensor.Int64, tensor.Shape{2}, []int64{0, -1}))}}
	xr := value(base+"_signal", graph.TensorType(tensor.Float32, batch, l), flat)
	idx := make([]int64, frames*size)
	for fr := range frames {
		for t := range size {
			idx[fr*size+t] = fr*step + t
		}
	}
	gather := &graph.Node{Op: graph.OpGather, Name: base + "/frames", Attrs: &graph.GatherAttrs{Axis: 1},
		Inputs: []*graph.Value{xr, konst(base+"_frame_index", tensor.FromInt64s(tensor.Int64, tensor.Shape{int(frames), int(size)}, idx))}}
	fv := value(base+"_frames", graph.TensorType(tensor.Float32, batch, graph.Const(frames), graph.Const(size)), gather)
	d := make([]float64, size*2*bins)
	for t := range size {
		w := 1.0
		if window != nil {
			w = window[t]
		}
		for k := range bins {
			// k·t mod N keeps the angle in [0, 2π) for large products
			a := 2 * math.Pi * float64((k*t)%size) / float64(size)
			d[t*2*bins+2*k] = w * math.Cos(a)
			d[t*2*bins+2*k+1] = -w * math.Sin(a)
		}
	}
	mm := &graph.Node{Op: graph.OpMatMul, Name: base + "/dft",
		Inputs: []*graph.Value{fv, konst(base+"_dft", tensor.FromFloat64s(tensor.Float32, tensor.Shape{int(size), int(2 * bins)}, d))}}
	y := value(base+"_dft_out", graph.TensorType(tensor.Float32, batch, graph.Const(frames), graph.Const(2*bins)), mm)
	back := &graph.Node{Op: graph.OpReshape, Name: n.Name, Attrs: &graph.ReshapeAttrs{},
		Inputs: []*graph.Value{y, konst(base+"_shape", tensor.FromInt64s(tensor.Int64, tensor.Shape{4}, []int64{0, frames, bins, 2}))}, Outputs: []*graph.Value{out}}
	out.Def = back
	return []*graph.Node{flat, gather, mm, back}
}
