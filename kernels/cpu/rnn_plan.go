package cpu

import (
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Node inputs of LSTM, GRU and RNN (ONNX order; P only exists for LSTM).
const (
	rnnInX = iota
	rnnInW
	rnnInR
	rnnInB
	rnnInLens
	rnnInH0
	rnnInC0
	rnnInP
)

// rnnAct is an activation in one or two stages: pre (optional) then post. The cells
// store the result of pre before applying post, so that a stage repeating its argument
// repeats a load, not an expression.
type rnnAct struct {
	pre, post func(x loopir.Expr) loopir.Expr
}

// rnnPlain is a one-stage activation.
func rnnPlain(f func(x loopir.Expr) loopir.Expr) rnnAct { return rnnAct{post: f} }

// rnnPlan is what the loop builders need to know about one recurrent node: sizes,
// attributes as decided values, and the kernel's parameter buffers (nil when absent).
type rnnPlan struct {
	op             graph.Op
	dt             tensor.DType
	seq, batch     loopir.Expr // X's extents: constants, or expressions over the dims
	sseq, sbatch   loopir.Expr // the same, at least 1 where symbolic: scratch extents
	isz, hid, dirs int64
	gates          int64 // 4 (LSTM, iofc), 3 (GRU, zrh), 1 (RNN)
	reverse        bool  // direction "reverse" (bidirectional: direction 1 only)
	layout1        bool  // batch-major X, Y, states
	lbr            bool  // GRU linear_before_reset
	inputForget    bool  // LSTM input_forget: f = 1 - i
	clip           float64
	acts           [][]rnnAct // per direction: f, g(, h)
	opts           RNNOptions

	x, b, lens, h0, c0, p *loopir.Buffer // parameters (nil when absent)
	w, r                  rnnWeight
	y, yh, yc             *loopir.Buffer // outputs, nil when the node lacks them
}

// rnnWeight is W or R as the kernel reads it: packed in panels, by the host when it is
// a constant (param is then [D, K·G·H]), else by the kernel from param as ONNX stores it
// ([D, G·H, K]) into a scratch buffer.
type rnnWeight struct {
	param  *loopir.Buffer
	packed bool
	panels rnnPanels
}

// gh is the width of the stacked gates.
func (p *rnnPlan) gh() int64 { return p.gates * p.hid }

// newRNNPlan validates a node and sizes its kernel; unsupported uses are Unsupported
// errors naming what is not supported.
func newRNNPlan(n *graph.Node, in []kernels.Input, opts RNNOptions) (*rnnPlan, error) {
	a, ok := n.Attrs.(*graph.RNNAttrs)
	if !ok {
		return nil, kernels.Unsupported("%v: attributes %T are not RNNAttrs", n.Op, n.Attrs)
	}
	p := &rnnPlan{op: n.Op, opts: opts, layout1: a.Layout != 0, lbr: a.LinearBeforeReset != 0, inputForget: a.InputForget != 0, clip: float64(a.Clip)}
	nAct, defaults := 1, []string{"Tanh"}
	switch n.Op {
	case graph.OpLSTM:
		p.gates, nAct, defaults = 4, 3, []string{"Sigmoid", "Tanh", "Tanh"}
	case graph.OpGRU:
		p.gates, nAct, defaults = 3, 2, []string{"Sigmoid", "Tanh"}
	case graph.OpRNN:
		p.gates = 1
	default:
		return nil, kernels.Unsupported("op %v is not a recurrent layer", n.Op)
	}
	if p.op != graph.OpGRU && p.lbr {
		return nil, kernels.Unsupported("%v: linear_before_reset", n.Op)
	}
	if p.op != graph.OpLSTM && p.inputForget {
		return nil, kernels.Unsupported("%v: input_forget", n.Op)
	}
	p.dirs = 1
	switch a.Direction {
	case "", "forward":
	case "reverse":
		p.reverse = true
	case "bidirectional":
		p.dirs = 2
	default:
		return nil, kernels.Unsupported("%v: direction %q", n.Op, a.Direction)
	}
	if p.clip < 0 {
		return nil, kernels.Unsupported("%v: negative clip %v", n.Op, p.clip)
	}
	get := func(i int) kernels.Input {
		if i < len(in) {
			return in[i]
		}
		return kernels.Input{}
	}
	x, w, r := get(rnnInX), get(rnnInW), get(rnnInR)
	if !x.Present() || !w.Present() || !r.Present() {
		return nil, kernels.Unsupported("%v: X, W and R are required", n.Op)
	}
	p.dt = x.T.DT
	if p.dt != tensor.Float32 && p.dt != tensor.Float64 {
		return nil, kernels.Unsupported("%v: element type %v (float32 and float64 only)", n.Op, p.dt)
	}
	xs := x.T.Shape
	ws, err := kernels.Extents(w.T)
	if err != nil {
		return nil, err
	}
	rs, err := kernels.Extents(r.T)
	if err != nil {
		return nil, err
	}
	if len(xs) != 3 || len(ws) != 3 || len(rs) != 3 {
		return nil, kernels.Unsupported("%v: X, W and R must be rank 3", n.Op)
	}
	p.seq, p.batch = xs[0], xs[1]
	if p.layout1 {
		p.seq, p.batch = xs[1], xs[0]
	}
	p.sseq, p.sbatch = rnnAtLeast1(p.seq), rnnAtLeast1(p.batch)
	isz, ok := xs[2].(*loopir.IntImm)
	if !ok {
		return nil, kernels.Unsupported("%v: input size %s is symbolic (it must match W)", n.Op, loopir.ExprString(xs[2]))
	}
	p.isz, p.hid = isz.V, rs[2]
	if ws[0] != p.dirs || rs[0] != p.dirs || ws[1] != p.gh() || rs[1] != p.gh() || ws[2] != p.isz {
		return nil, kernels.Unsupported("%v: W %v / R %v do not fit %d directions, %d gates, hidden %d, input %d", n.Op, ws, rs, p.dirs, p.gates, p.hid, p.isz)
	}
	if a.HiddenSize != 0 && a.HiddenSize != p.hid {
		return nil, kernels.Unsupported("%v: hidden_size %d but R has %d columns", n.Op, a.HiddenSize, p.hid)
	}
	if rnnIsZero(p.seq) || rnnIsZero(p.batch) || p.hid == 0 || p.isz == 0 {
		return nil, kernels.Unsupported("%v: an empty extent (seq %s, batch %s, input %d, hidden %d)", n.Op,
			loopir.ExprString(p.seq), loopir.ExprString(p.batch), p.isz, p.hid)
	}
	for _, in := range []kernels.Input{w, r, get(rnnInB), get(rnnInH0), get(rnnInC0), get(rnnInP)} {
		if in.Present() && in.T.DT != p.dt {
			return nil, kernels.Unsupported("%v: %s is %v, X is %v", n.Op, in.T.Name, in.T.DT, p.dt)
		}
	}
	if p.acts, err = rnnActivations(n.Op, a, defaults, nAct, p.dirs, p.dt, opts.ExactActivations); err != nil {
		return nil, err
	}
	if err := p.optionalShapes(n.Op, get); err != nil {
		return nil, err
	}
	return p, nil
}

// optionalShapes checks B, sequence_lens, initial_h, initial_c and P.
func (p *rnnPlan) optionalShapes(op graph.Op, get func(int) kernels.Input) error {
	// extents are compared as expressions: a symbolic batch must be X's symbol
	want := func(i int, what string, shape ...loopir.Expr) error {
		in := get(i)
		if !in.Present() {
			return nil
		}
		s := in.T.Shape
		same := len(s) == len(shape)
		for k := 0; same && k < len(s); k++ {
			same = loopir.ExprString(s[k]) == loopir.ExprString(shape[k])
		}
		if !same {
			return kernels.Unsupported("%v: %s has shape %s, want %s", op, what, rnnShapeString(s), rnnShapeString(shape))
		}
		return nil
	}
	c := loopir.Int
	state := []loopir.Expr{c(p.dirs), p.batch, c(p.hid)}
	if p.layout1 {
		state = []loopir.Expr{p.batch, c(p.dirs), c(p.hid)}
	}
	checks := []error{
		want(rnnInB, "B", c(p.dirs), c(2*p.gh())),
		want(rnnInLens, "sequence_lens", p.batch),
		want(rnnInH0, "initial_h", state...),
	}
	if op == graph.OpLSTM {
		checks = append(checks, want(rnnInC0, "initial_c", state...), want(rnnInP, "P", c(p.dirs), c(3*p.hid)))
	} else if get(rnnInC0).Present() || get(rnnInP).Present() {
		return kernels.Unsupported("%v: inputs beyond initial_h", op)
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if l := get(rnnInLens); l.Present() && !l.T.DT.IsInt() {
		return kernels.Unsupported("%v: sequence_lens of type %v", op, l.T.DT)
	}
	return nil
}

// rnnActivations builds the activations of every direction. Activations that take no
// parameter are always supported; LeakyRelu, ThresholdedRelu, HardSigmoid and Elu only
// with the defaults of the ONNX ops of those names, because implementations disagree on
// how activation_alpha/beta are consumed (by activation position, or one value per
// activation that takes one); Affine and ScaledTanh, which have no default, not at all.
func rnnActivations(op graph.Op, a *graph.RNNAttrs, defaults []string, nAct int, dirs int64, dt tensor.DType, exact bool) ([][]rnnAct, error) {
	names := a.Activations
	if names == nil {
		for d := int64(0); d < dirs; d++ {
			names = append(names, defaults...)
		}
	}
	if int64(len(names)) != int64(nAct)*dirs {
		return nil, kernels.Unsupported("%v: %d activations for %d directions of %d", op, len(names), dirs, nAct)
	}
	params := len(a.ActivationAlpha) > 0 || len(a.ActivationBeta) > 0
	lit := func(v float64) loopir.Expr { return loopir.Float(v, dt) }
	zero, one := lit(0), lit(1)
	out := make([][]rnnAct, dirs)
	for i, name := range names {
		var f func(x loopir.Expr) loopir.Expr
		parameterized := true
		switch strings.ToLower(name) {
		case "sigmoid", "tanh":
			exactF := te.Sigmoid
			if strings.EqualFold(name, "tanh") {
				exactF = te.Tanh
			}
			f, parameterized = exactF, false
			if !exact && dt == tensor.Float32 {
				d := int64(i / nAct)
				out[d] = append(out[d], rnnFast(strings.ToLower(name)))
				continue
			}
		case "relu":
			f, parameterized = func(x loopir.Expr) loopir.Expr { return te.MaxOf(x, zero) }, false
		case "softsign":
			f, parameterized = func(x loopir.Expr) loopir.Expr { return te.Div(x, te.Add(one, te.Abs(x))) }, false
		case "softplus":
			f, parameterized = func(x loopir.Expr) loopir.Expr {
				// log1p(exp(-|x|)) + max(x, 0), stable for large |x|
				return te.Add(te.Log(te.Add(one, te.Exp(te.Sub(zero, te.Abs(x))))), te.MaxOf(x, zero))
			}, false
		case "leakyrelu":
			f = func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.LT, x, zero), te.Mul(lit(0.01), x), x)
			}
		case "thresholdedrelu":
			f = func(x loopir.Expr) loopir.Expr { return te.Select(loopir.Bin(loopir.GT, x, one), x, zero) }
		case "hardsigmoid":
			f = func(x loopir.Expr) loopir.Expr {
				return te.MinOf(te.MaxOf(te.Add(te.Mul(lit(0.2), x), lit(0.5)), zero), one)
			}
		case "elu":
			f = func(x loopir.Expr) loopir.Expr {
				return te.Select(loopir.Bin(loopir.LT, x, zero), te.Sub(te.Exp(x), one), x)
			}
		default:
			return nil, kernels.Unsupported("%v: activation %q", op, name)
		}
		if parameterized && params {
			return nil, kernels.Unsupported("%v: activation %s with activation_alpha/activation_beta", op, name)
		}
		d := i / nAct
		out[d] = append(out[d], rnnPlain(f))
	}
	return out, nil
}
