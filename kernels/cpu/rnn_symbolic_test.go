package cpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Recurrent layers over a symbolic sequence length s and batch b: each node is lowered
// once and run at every binding of rnnEnvs against the reference evaluator, then
// checked static at the last one.

// rnnEnvs: seq 0, 1, 7 and 33 at batch 1 and 3, an empty batch, and batches of 4 and 8
// (row counts leave every remainder 1 to 5 after the blocks of 6 rows, and 8 is a
// full block and a remainder in the recurrent product; with seq 33 a forward
// projection is large enough to run in parallel).
var rnnEnvs = []map[string]int64{
	{"s": 0, "b": 1}, {"s": 1, "b": 1}, {"s": 7, "b": 1}, {"s": 33, "b": 1},
	{"s": 0, "b": 3}, {"s": 1, "b": 3}, {"s": 7, "b": 3}, {"s": 5, "b": 0},
	{"s": 4, "b": 4}, {"s": 33, "b": 8}, {"s": 33, "b": 3},
}

// rnnSymCase is one recurrent node with X of [s, b, isz] (layout 0) or [b, s, isz].
type rnnSymCase struct {
	op          graph.Op
	dir         string
	isz, hidden int
	constW      bool // W, R (and B, P) as compile-time constants
	bias        bool
	initial     bool // initial_h (and initial_c)
	peep        bool
	lens        bool // a run-time sequence_lens of values in [0, s]
	numOut      int
	attrs       func(*graph.RNNAttrs)
}

func (c rnnSymCase) String() string {
	return fmt.Sprintf("%v/%s/i%d/h%d/const=%v/bias=%v/init=%v/peep=%v/lens=%v/out%d",
		c.op, c.dir, c.isz, c.hidden, c.constW, c.bias, c.initial, c.peep, c.lens, c.numOut)
}

func (c rnnSymCase) check(t *testing.T, l nt.Lowerer) {
	t.Helper()
	gates := map[graph.Op]int{graph.OpLSTM: 4, graph.OpGRU: 3, graph.OpRNN: 1}[c.op]
	dirs := 1
	if c.dir == "bidirectional" {
		dirs = 2
	}
	a := c.op.NewAttrs().(*graph.RNNAttrs)
	a.Direction, a.HiddenSize = c.dir, int64(c.hidden)
	if c.attrs != nil {
		c.attrs(a)
	}
	f := tensor.Float32
	d, h, i := fmt.Sprint(dirs), fmt.Sprint(c.hidden), fmt.Sprint(c.isz)
	weight := func(seed uint64, s float64, shape ...int) nt.SymArg {
		if c.constW {
			return nt.SymC(scaled(seed, s, shape...))
		}
		dims := make([]string, len(shape))
		for k, v := range shape {
			dims[k] = fmt.Sprint(v)
		}
		return nt.Sym(f, dims...)
	}
	x, state := nt.Sym(f, "s", "b", i), nt.Sym(f, d, "b", h)
	if a.Layout != 0 {
		x, state = nt.Sym(f, "b", "s", i), nt.Sym(f, "b", d, h)
	}
	args := []nt.SymArg{x, weight(2, 0.4, dirs, gates*c.hidden, c.isz), weight(3, 0.4, dirs, gates*c.hidden, c.hidden),
		nt.SymNone, nt.SymNone, nt.SymNone, nt.SymNone, nt.SymNone}
	if c.bias {
		args[3] = weight(4, 0.5, dirs, 2*gates*c.hidden)
	}
	if c.lens {
		args[4] = nt.Sym(tensor.Int32, "b")
		args[4].Data = func(env map[string]int64) *tensor.Tensor {
			v := make([]int32, env["b"])
			for k := range v {
				v[k] = int32((int64(k)*5 + 3) % (env["s"] + 1))
			}
			return tensor.MustFromSlice(tensor.Shape{len(v)}, v)
		}
	}
	if c.initial {
		args[5] = state
		if c.op == graph.OpLSTM {
			args[6] = state
		}
	}
	if c.peep {
		args[7] = weight(7, 0.5, dirs, 3*c.hidden)
	}
	for len(args) > 3 && args[len(args)-1].Type.DType == 0 && args[len(args)-1].Const == nil {
		args = args[:len(args)-1]
	}
	nt.CheckSymbolic(t, l, c.op, a, c.numOut, args, rnnEnvs...)
}

// rnnSymCases: the zoo's layers (lstm_tagger: bidirectional LSTM with initial states
// and three outputs; gru_speech: forward GRU, linear_before_reset, initial_h, two
// outputs) and the other paths: reverse, run-time weights, peepholes, GRU without
// linear_before_reset (two recurrent products per step), plain RNN, layout 1,
// sequence_lens. Hidden sizes leave a narrower tile and a partial vector.
var rnnSymCases = []rnnSymCase{
	{op: graph.OpLSTM, dir: "bidirectional", isz: 10, hidden: 13, constW: true, bias: true, initial: true, numOut: 3},
	{op: graph.OpLSTM, dir: "forward", isz: 10, hidden: 13, constW: true, bias: true, numOut: 1},
	{op: graph.OpLSTM, dir: "reverse", isz: 6, hidden: 9, initial: true, peep: true, numOut: 3},
	{op: graph.OpGRU, dir: "forward", isz: 12, hidden: 24, constW: true, bias: true, initial: true, numOut: 2,
		attrs: func(a *graph.RNNAttrs) { a.LinearBeforeReset = 1 }},
	{op: graph.OpGRU, dir: "bidirectional", isz: 7, hidden: 20, constW: true, bias: true, numOut: 2},
	{op: graph.OpGRU, dir: "reverse", isz: 5, hidden: 11, bias: true, initial: true, numOut: 1},
	{op: graph.OpRNN, dir: "bidirectional", isz: 5, hidden: 9, constW: true, bias: true, initial: true, numOut: 2},
	{op: graph.OpLSTM, dir: "bidirectional", isz: 6, hidden: 12, constW: true, bias: true, initial: true, numOut: 3,
		attrs: func(a *graph.RNNAttrs) { a.Layout = 1 }},
	{op: graph.OpGRU, dir: "bidirectional", isz: 6, hidden: 12, constW: true, bias: true, initial: true, lens: true, numOut: 2},
	{op: graph.OpLSTM, dir: "forward", isz: 6, hidden: 12, bias: true, lens: true, numOut: 3},
}

// TestSymbolicRNN runs every case with the default strategy (micro-kernels of the
// host's vector unit).
func TestSymbolicRNN(t *testing.T) {
	for _, c := range rnnSymCases {
		t.Run(c.String(), func(t *testing.T) { c.check(t, Strategies(kernels.Default())) })
	}
}

// TestSymbolicRNNOptions runs cases that take distinct paths with plain loops (unrolled
// 3 rows per pass, the C library's activations) and with the generic 4-lane
// micro-kernels.
func TestSymbolicRNNOptions(t *testing.T) {
	for _, o := range []struct {
		opts  RNNOptions
		cases []int // indices into rnnSymCases
	}{
		{RNNOptions{Unroll: 3, Parallel: true, ExactActivations: true}, []int{0, 3, 4, 6, 8}},
		{RNNOptions{Unroll: 4, Parallel: true, Vector: RNNVector{ISA: "generic", Lanes: 4, Registers: 16}}, []int{1, 4, 5}},
	} {
		for _, i := range o.cases {
			c := rnnSymCases[i]
			t.Run(fmt.Sprintf("%+v/%v", o.opts, c), func(t *testing.T) { c.check(t, rnnLowerer{o.opts}) })
		}
	}
}

// TestSymbolicRNNUnsupported: a symbolic input size, and an initial state whose batch
// is another symbol than X's, are refused with ErrNoKernel naming the op.
func TestSymbolicRNNUnsupported(t *testing.T) {
	f := tensor.Float32
	s, b, c := te.Dim("s"), te.Dim("b"), te.Dim("c")
	w, r := f32(2, 1, 8, 3), f32(3, 1, 8, 2)
	for name, x := range map[string][]loopir.Expr{
		"symbolic input size": {s, b, te.Dim("i")},
		"initial_h batch c":   {s, b, loopir.Int(3)},
	} {
		n := &graph.Node{Op: graph.OpLSTM, Attrs: graph.OpLSTM.NewAttrs(), Outputs: []*graph.Value{{}}}
		in := []kernels.Input{{T: te.Placeholder("x", f, x...)}, {T: te.Placeholder("w", f, kernels.Static(1, 8, 3)...), Const: w},
			{T: te.Placeholder("r", f, kernels.Static(1, 8, 2)...), Const: r}}
		if name == "initial_h batch c" {
			in = append(in, kernels.Input{}, kernels.Input{}, kernels.Input{T: te.Placeholder("h0", f, loopir.Int(1), c, loopir.Int(2))})
		}
		_, err := Strategies(kernels.Default()).Lower(n, in, target.Host())
		if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), "LSTM") {
			t.Errorf("%s: got %v, want ErrNoKernel naming LSTM", name, err)
		}
	}
}
