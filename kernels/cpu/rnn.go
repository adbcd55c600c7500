package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// rnnStrategies: recurrent layers (LSTM, GRU, RNN), whose time loop is sequential.
// Their loop nests are built directly (RNN, rnn_build.go): no compute definition and
// no schedule primitives, so the trace is empty; the knobs are RNNOptions.
func rnnStrategies() map[graph.Op][]kernels.Strategy {
	st := kernels.Strategy{Name: "rnn-loops", Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
		return buildRNN(n, in, DefaultRNN(t))
	}}
	return map[graph.Op][]kernels.Strategy{
		graph.OpLSTM: {st},
		graph.OpGRU:  {st},
		graph.OpRNN:  {st},
	}
}

// DefaultRNN runs the directions of a bidirectional layer on two threads (and a long
// input projection over column panels), the float32 products on the micro-kernels of
// the target's vector unit, and sigmoid and tanh as vectorizable rational functions.
func DefaultRNN(t target.Target) RNNOptions {
	v := RNNVector{ISA: "generic", Lanes: 4, Registers: 16}
	switch {
	case t.Has("avx512f"):
		v = RNNVector{ISA: "avx512", Lanes: 16, Registers: 32}
	case t.Has("avx2") && t.Has("fma"):
		v = RNNVector{ISA: "avx2", Lanes: 8, Registers: 16}
	}
	return RNNOptions{Parallel: true, Unroll: 4, Vector: v}
}

// buildRNN lowers one recurrent node with the given knobs.
func buildRNN(n *graph.Node, in []kernels.Input, opts RNNOptions) (*kernels.Impl, error) {
	f, params, err := RNN(kernels.KernelName(n), n, in, opts)
	if err != nil {
		return nil, err
	}
	return &kernels.Impl{Func: f, Trace: &schedule.Trace{}, Params: params}, nil
}
