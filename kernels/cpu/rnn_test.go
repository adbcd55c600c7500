package cpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// rnnCase is one recurrent node under test.
type rnnCase struct {
	op                      graph.Op
	dir                     string
	seq, batch, isz, hidden int
	bias, initial           bool // give B, and initial_h (and initial_c)
	numOut                  int
	constW                  bool // W, R (and B) as compile-time constants
	lbr                     bool
	peep                    bool
	lens                    []int32 // sequence_lens, nil for none
	constLens               bool
	attrs                   func(*graph.RNNAttrs)
}

func (c rnnCase) String() string {
	return fmt.Sprintf("%v/%s/s%d/b%d/i%d/h%d/bias=%v/init=%v/out%d/const=%v/lbr=%v/peep=%v/lens=%v",
		c.op, c.dir, c.seq, c.batch, c.isz, c.hidden, c.bias, c.initial, c.numOut, c.constW, c.lbr, c.peep, c.lens)
}

// scaled is f32 scaled, so that gate pre-activations stay out of saturation.
func scaled(seed uint64, s float64, shape ...int) *tensor.Tensor {
	v := f32(seed, shape...).Float64s()
	for i := range v {
		v[i] *= s
	}
	return tensor.FromFloat64s(tensor.Float32, tensor.Shape(shape), v)
}

// check runs the case through the strategy table and the reference.
func (c rnnCase) check(t *testing.T) {
	t.Helper()
	c.checkWith(t, Strategies(kernels.Default()), false)
}

// checkWith runs the case through l, with float64 data when f64.
func (c rnnCase) checkWith(t *testing.T, l nt.Lowerer, f64 bool) {
	t.Helper()
	gates := map[graph.Op]int{graph.OpLSTM: 4, graph.OpGRU: 3, graph.OpRNN: 1}[c.op]
	dirs := 1
	if c.dir == "bidirectional" {
		dirs = 2
	}
	a := c.op.NewAttrs().(*graph.RNNAttrs)
	a.Direction, a.HiddenSize = c.dir, int64(c.hidden)
	if c.lbr {
		a.LinearBeforeReset = 1
	}
	if c.attrs != nil {
		c.attrs(a)
	}
	wArg := nt.In
	if c.constW {
		wArg = nt.C
	}
	g := c.hidden * gates
	x := scaled(1, 1, c.seq, c.batch, c.isz)
	if a.Layout != 0 {
		x = scaled(1, 1, c.batch, c.seq, c.isz)
	}
	args := []nt.Arg{nt.In(x), wArg(scaled(2, 0.4, dirs, g, c.isz)), wArg(scaled(3, 0.4, dirs, g, c.hidden)), nt.None, nt.None, nt.None}
	if c.bias {
		args[3] = wArg(scaled(4, 0.5, dirs, 2*g))
	}
	if c.lens != nil {
		lt := tensor.MustFromSlice(tensor.Shape{c.batch}, c.lens)
		args[4] = nt.In(lt)
		if c.constLens {
			args[4] = nt.C(lt)
		}
	}
	state := []int{dirs, c.batch, c.hidden}
	if a.Layout != 0 {
		state = []int{c.batch, dirs, c.hidden}
	}
	if c.initial {
		args[5] = nt.In(scaled(5, 1, state...))
	}
	if c.op == graph.OpLSTM {
		args = append(args, nt.None, nt.None)
		if c.initial {
			args[6] = nt.In(scaled(6, 1, state...))
		}
		if c.peep {
			args[7] = wArg(scaled(7, 0.5, dirs, 3*c.hidden))
		}
	}
	for len(args) > 3 && args[len(args)-1].T == nil {
		args = args[:len(args)-1]
	}
	if got := nt.CheckNode(t, Strategies(kernels.Default()), c.op, a, c.numOut, args...); got != "rnn-loops" {
		t.Fatalf("%v: strategy %s", c, got)
	}
}

var rnnDirections = []string{"forward", "reverse", "bidirectional"}

// TestRNNLSTM covers the three directions, batch 1 and 3, seq 5 and 11, hidden 16 and 24,
// with and without B and initial states, one or three outputs, constant or run-time
// weights.
func TestRNNLSTM(t *testing.T) {
	i := 0
	for _, dir := range rnnDirections {
		for _, hidden := range []int{16, 24} {
			for _, extras := range []bool{false, true} {
				c := rnnCase{op: graph.OpLSTM, dir: dir, seq: []int{5, 11}[i%2], batch: []int{1, 3}[i/2%2], isz: 10, hidden: hidden,
					bias: extras, initial: extras, numOut: []int{1, 3}[i/4%2], constW: i%3 != 2}
				i++
				t.Run(c.String(), c.check)
			}
		}
	}
}

// TestRNNGRU covers the directions and sizes of TestRNNLSTM with linear_before_reset 0
// and 1 (PyTorch exports 1).
func TestRNNGRU(t *testing.T) {
	i := 0
	for _, dir := range rnnDirections {
		for _, hidden := range []int{16, 24} {
			for _, lbr := range []bool{false, true} {
				c := rnnCase{op: graph.OpGRU, dir: dir, seq: []int{11, 5}[i%2], batch: []int{1, 3}[i/2%2], isz: 7, hidden: hidden,
					bias: i%3 != 1, initial: i%4 != 0, numOut: 1 + i%2, constW: i%5 != 3, lbr: lbr}
				i++
				t.Run(c.String(), c.check)
			}
		}
	}
}

// TestRNNPlain covers the plain RNN in every direction.
func TestRNNPlain(t *testing.T) {
	for i, dir := range rnnDirections {
		c := rnnCase{op: graph.OpRNN, dir: dir, seq: 6, batch: 1 + i, isz: 5, hidden: 24 - 4*i, bias: i != 1, initial: i != 0, numOut: 2 - i%2, constW: i != 2}
		t.Run(c.String(), c.check)
	}
}

// TestRNNAttributes covers peepholes, clip, input_forget, other activations, layout 1
// and sequence_lens (run-time, constant, constant and full).
func TestRNNAttributes(t *testing.T) {
	cases := []rnnCase{
		{op: graph.OpLSTM, dir: "bidirectional", peep: true, initial: true, bias: true},
		{op: graph.OpLSTM, dir: "forward", peep: true, attrs: func(a *graph.RNNAttrs) { a.Clip = 0.7; a.InputForget = 1 }},
		{op: graph.OpGRU, dir: "reverse", bias: true, attrs: func(a *graph.RNNAttrs) { a.Clip = 0.5 }},
		{op: graph.OpLSTM, dir: "bidirectional", bias: true, initial: true, attrs: func(a *graph.RNNAttrs) { a.Layout = 1 }},
		{op: graph.OpGRU, dir: "bidirectional", bias: true, initial: true, lbr: true, attrs: func(a *graph.RNNAttrs) { a.Layout = 1 }},
		{op: graph.OpRNN, dir: "bidirectional", bias: true, attrs: func(a *graph.RNNAttrs) {
			a.Activations = []string{"Relu", "Softsign"}
		}},
		{op: graph.OpGRU, dir: "forward", bias: true, attrs: func(a *graph.RNNAttrs) {
			a.Activations = []string{"HardSigmoid", "Softplus"}
		}},
		{op: graph.OpLSTM, dir: "forward", bias: true, attrs: func(a *graph.RNNAttrs) {
			a.Activations = []string{"Sigmoid", "LeakyRelu", "Elu"}
		}},
		{op: graph.OpLSTM, dir: "bidirectional", bias: true, initial: true, lens: []int32{7, 3, 0}},
		{op: graph.OpGRU, dir: "bidirectional", bias: true, initial: true, lens: []int32{2, 7, 5}, constLens: true},
		{op: graph.OpGRU, dir: "reverse", bias: true, lbr: true, lens: []int32{4, 7, 1}},
		{op: graph.OpRNN, dir: "forward", initial: true, lens: []int32{7, 7, 7}, constLens: true},
	}
	for _, c := range cases {
		c.seq, c.batch, c.isz, c.hidden, c.constW = 7, 3, 6, 12, true
		c.numOut = map[graph.Op]int{graph.OpLSTM: 3, graph.OpGRU: 2, graph.OpRNN: 2}[c.op]
		t.Run(c.String(), c.check)
	}
}

// TestRNNUnsupported checks that what the kernels do not implement is refused with
// ErrNoKernel and a reason, never computed wrongly.
func TestRNNUnsupported(t *testing.T) {
	x, w, r := f32(1, 4, 1, 3), f32(2, 1, 8, 3), f32(3, 1, 8, 2)
	for name, set := range map[string]func(*graph.RNNAttrs){
		"activation alpha": func(a *graph.RNNAttrs) {
			a.Activations = []string{"Sigmoid", "LeakyRelu", "Tanh"}
			a.ActivationAlpha = []float32{0.2}
		},
		"affine":    func(a *graph.RNNAttrs) { a.Activations = []string{"Sigmoid", "Affine", "Tanh"} },
		"direction": func(a *graph.RNNAttrs) { a.Direction = "sideways" },
	} {
		a := graph.OpLSTM.NewAttrs().(*graph.RNNAttrs)
		set(a)
		n := &graph.Node{Op: graph.OpLSTM, Attrs: a, Inputs: make([]*graph.Value, 3), Outputs: []*graph.Value{{}}}
		in := make([]kernels.Input, 3)
		for i, v := range []*tensor.Tensor{x, w, r} {
			n.Inputs[i] = &graph.Value{Type: graph.TensorType(tensor.Float32, graph.StaticShape(int64(v.Shape[0]), int64(v.Shape[1]), int64(v.Shape[2]))...)}
			n.Inputs[i].Const = v
		}
		ph, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		copy(in, ph)
		_, err = Strategies(kernels.Default()).Lower(n, in, target.Host())
		if !errors.Is(err, kernels.ErrNoKernel) {
			t.Errorf("%s: got %v, want ErrNoKernel", name, err)
		}
	}
}

// rnnLowerer lowers recurrent nodes with fixed options (the other knobs of the strategy).
type rnnLowerer struct{ opts RNNOptions }

func (l rnnLowerer) Lower(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
	impl, err := buildRNN(n, in, l.opts)
	if err == nil {
		impl.Strategy = "rnn-loops"
	}
	return impl, err
}

// TestRNNOptions runs LSTM and GRU cases with the knobs the default strategy does not
// use: plain loops instead of micro-kernels (unrolled 1, 3 and 4 rows per pass), the C
// library's sigmoid and tanh, no parallel directions, and float64 data.
func TestRNNOptions(t *testing.T) {
	host := DefaultRNN(target.Host())
	for _, o := range []RNNOptions{
		{Unroll: 3, ExactActivations: true},
		{Unroll: 1, Parallel: true},
		{Unroll: 4, Parallel: true, Vector: RNNVector{ISA: "generic", Lanes: 4, Registers: 16}},
		{Vector: host.Vector, ExactActivations: true},
	} {
		l := rnnLowerer{o}
		for i, c := range []rnnCase{
			{op: graph.OpLSTM, dir: "bidirectional", seq: 5, batch: 3, isz: 7, hidden: 13, bias: true, initial: true, numOut: 3, peep: true},
			{op: graph.OpGRU, dir: "forward", seq: 6, batch: 1, isz: 9, hidden: 20, bias: true, initial: true, numOut: 2},
			{op: graph.OpGRU, dir: "reverse", seq: 4, batch: 2, isz: 5, hidden: 16, bias: true, numOut: 2, lbr: true, lens: []int32{3, 4}},
			{op: graph.OpRNN, dir: "bidirectional", seq: 4, batch: 2, isz: 5, hidden: 9, initial: true, numOut: 2},
		} {
			c.constW = i%2 == 0
			t.Run(fmt.Sprintf("%+v/%v", o, c), func(t *testing.T) { c.checkWith(t, l, i == 1) })
		}
	}
}
