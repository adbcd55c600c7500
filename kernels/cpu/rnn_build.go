package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// RNNOptions are the knobs of the recurrent loop nests.
type RNNOptions struct {
	// Parallel runs the two directions of a bidirectional layer on two threads, and the
	// input projection of a one-direction layer in parallel (over column panels, or time
	// steps with plain loops) when it has enough work. The time loop stays serial.
	Parallel bool
	// Unroll is how many weight rows one pass over a row of gates accumulates (the row
	// is loaded and stored once per pass); 0 means 4.
	Unroll int64
	// ExactActivations calls the C library's expf/tanhf for sigmoid and tanh instead of
	// the vectorizable rational approximations (within 4e-7, see rnn_act.go) used for
	// float32 by default.
	ExactActivations bool
	// Vector declares the float32 micro-kernels the products run on (see RNNVector);
	// the zero value keeps plain loops.
	Vector RNNVector
}

// rnnParallelWork is the least number of multiply-adds an input projection needs before
// it runs as a parallel loop (a parallel region costs a few microseconds).
const rnnParallelWork = 1 << 16

// RNN builds the loop nest of an LSTM, GRU or RNN node (ONNX semantics, as kernels/ref):
// per direction, the input projection X·Wᵀ + biases for every time step at once, then a
// serial loop over time steps, each a recurrent product h·Rᵀ over the stacked gates and
// the elementwise gate math, writing Y and the state; finally Y_h (and Y_c). The
// parameters are the node inputs the kernel reads (X, W, R, then B, sequence_lens,
// initial_h, initial_c, P when present), then the node outputs; the returned Params say
// which input feeds each. Constant W and R are packed on the host (Param.Prepack: column
// panels, see rnn_gemm.go) so that every inner loop runs over contiguous gates; run-time
// W and R are packed by the kernel into scratch buffers. All directions, optional
// inputs, activations without parameters (and the parameterized ones with their
// defaults), clip, input_forget, linear_before_reset, peepholes, sequence_lens and
// layout 1 are supported; what is not is an Unsupported error. The sequence length and
// the batch may be symbolic (X's extents over the kernel's dims, see rnn_sym.go); the
// input size, the hidden size and the directions must be constants.
func RNN(name string, n *graph.Node, in []kernels.Input, opts RNNOptions) (*loopir.PrimFunc, []kernels.Param, error) {
	if opts.Unroll <= 0 {
		opts.Unroll = 4
	}
	p, err := newRNNPlan(n, in, opts)
	if err != nil {
		return nil, nil, err
	}
	var params []*loopir.Buffer
	var feeds []kernels.Param
	buf := func(name string, dt tensor.DType, shape ...loopir.Expr) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: dt, Shape: shape, Scope: "global"}
	}
	add := func(i int, b *loopir.Buffer, pack func(*tensor.Tensor) (*tensor.Tensor, error), layout string) *loopir.Buffer {
		params = append(params, b)
		feeds = append(feeds, kernels.Param{Input: i, Prepack: pack, Layout: layout})
		return b
	}
	shapeOf := func(i int) []loopir.Expr { return append([]loopir.Expr{}, in[i].T.Shape...) }
	c := loopir.Int
	present := func(i int) bool { return i < len(in) && in[i].Present() }
	p.x = add(rnnInX, buf("X", p.dt, shapeOf(rnnInX)...), nil, "")
	gh := p.gh()
	v := opts.Vector
	if p.dt != tensor.Float32 {
		v = RNNVector{}
	}
	rSegs := [][2]int64{{0, gh}}
	if p.op == graph.OpGRU && !p.lbr && v.Lanes > 0 {
		rSegs = [][2]int64{{0, 2 * p.hid}, {2 * p.hid, gh}} // r ⊙ h comes between the two products
	}
	weight := func(i int, name string, panels rnnPanels) rnnWeight {
		if in[i].Const == nil {
			return rnnWeight{param: add(i, buf(name, p.dt, shapeOf(i)...), nil, ""), panels: panels}
		}
		packed := buf(name+"_packed", p.dt, c(p.dirs), c(panels.size()))
		return rnnWeight{param: add(i, packed, panels.pack, panels.name()), packed: true, panels: panels}
	}
	p.w = weight(rnnInW, "W", v.panelsFor(p.seq, p.isz, [][2]int64{{0, gh}}))
	p.r = weight(rnnInR, "R", v.panelsFor(p.batch, p.hid, rSegs))
	if present(rnnInB) {
		p.b = add(rnnInB, buf("B", p.dt, shapeOf(rnnInB)...), nil, "")
	}
	if present(rnnInLens) && !rnnFullLengths(in[rnnInLens].Const, p.seq) {
		p.lens = add(rnnInLens, buf("seq_lens", in[rnnInLens].T.DT, p.batch), nil, "")
	}
	if present(rnnInH0) {
		p.h0 = add(rnnInH0, buf("initial_h", p.dt, shapeOf(rnnInH0)...), nil, "")
	}
	if p.op == graph.OpLSTM && present(rnnInC0) {
		p.c0 = add(rnnInC0, buf("initial_c", p.dt, shapeOf(rnnInC0)...), nil, "")
	}
	if p.op == graph.OpLSTM && present(rnnInP) {
		p.p = add(rnnInP, buf("P", p.dt, c(p.dirs), c(3*p.hid)), nil, "")
	}
	yShape := []loopir.Expr{p.seq, c(p.dirs), p.batch, c(p.hid)}
	hShape := []loopir.Expr{c(p.dirs), p.batch, c(p.hid)}
	if p.layout1 {
		yShape = []loopir.Expr{p.batch, p.seq, c(p.dirs), c(p.hid)}
		hShape = []loopir.Expr{p.batch, c(p.dirs), c(p.hid)}
	}
	outs := []**loopir.Buffer{&p.y, &p.yh, &p.yc}
	names := []string{"Y", "Y_h", "Y_c"}
	if len(n.Outputs) > len(outs) || (p.op != graph.OpLSTM && len(n.Outputs) > 2) {
		return nil, nil, kernels.Unsupported("%v: %d outputs", n.Op, len(n.Outputs))
	}
	for i := range n.Outputs {
		shape := hShape
		if i == 0 {
			shape = yShape
		}
		*outs[i] = buf(names[i], p.dt, shape...)
		params = append(params, *outs[i])
	}
	if len(n.Outputs) == 0 {
		return nil, nil, kernels.Unsupported("%v without outputs", n.Op)
	}
	f := &loopir.PrimFunc{Name: name, Params: params, Dims: rnnDims(params), Body: p.body()}
	rnnRenameLoops(f.Body, f.Dims)
	if err := loopir.Verify(f); err != nil {
		panic(fmt.Sprintf("BUG: RNN loop nest of %v: %v", n.Op, err))
	}
	return f, feeds, nil
}

// rnnFullLengths reports a constant sequence_lens whose every entry is seq (the same as
// no sequence_lens at all); never where seq is symbolic.
func rnnFullLengths(c *tensor.Tensor, seqE loopir.Expr) bool {
	seq, ok := rnnConst(seqE)
	if c == nil || !ok {
		return false
	}
	for _, v := range c.Int64s() {
		if v != seq {
			return false
		}
	}
	return true
}
