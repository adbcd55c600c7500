package graph

import "reflect"

// Recurrent ops: LSTM, GRU and RNN share one attribute struct and one inference.

// RNNAttrs is shared by LSTM, GRU and RNN. Clip 0 means no clipping.
type RNNAttrs struct {
	ActivationAlpha   []float32 `attr:"activation_alpha"`
	ActivationBeta    []float32 `attr:"activation_beta"`
	Activations       []string  `attr:"activations"`
	Clip              float32   `attr:"clip"`
	Direction         string    `attr:"direction" default:"forward"`
	HiddenSize        int64     `attr:"hidden_size"`
	InputForget       int64     `attr:"input_forget"`
	Layout            int64     `attr:"layout"`
	LinearBeforeReset int64     `attr:"linear_before_reset"`
}

func rnnOps() []OpInfo {
	row := func(op Op, maxIn, maxOut int) OpInfo {
		return OpInfo{Op: op, MinIn: 3, MaxIn: maxIn, MinOut: 0, MaxOut: maxOut, Attrs: reflect.TypeFor[RNNAttrs](), Pattern: Opaque, Infer: inferRNN}
	}
	return []OpInfo{row(OpLSTM, 8, 3), row(OpGRU, 6, 2), row(OpRNN, 6, 2)}
}

func inferRNN(ic *InferCtx, n *Node) ([]Type, error) {
	x, okx, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	w, okw, err := ranked(n, 1)
	if err != nil {
		return nil, err
	}
	a := n.Attrs.(*RNNAttrs)
	dirs := int64(1)
	switch a.Direction {
	case "forward", "reverse":
	case "bidirectional":
		dirs = 2
	default:
		return nil, Inferf(n, "direction %q", a.Direction)
	}
	if !okx && okw && len(w.Shape) == 3 {
		// X's rank is checked when the node runs; the outputs' ranks do not depend on it
		x = TensorType(x.DType, ic.FreshShape(3)...)
	} else if !okx || !okw || len(x.Shape) != 3 || len(w.Shape) != 3 {
		return nil, Inferf(n, "X %v and W %v must be rank 3", x, w)
	}
	hidden := Const(a.HiddenSize)
	if a.HiddenSize == 0 {
		gates := int64(1)
		switch n.Op {
		case OpLSTM:
			gates = 4
		case OpGRU:
			gates = 3
		}
		h, ok := w.Shape[1].Div(Const(gates))
		if !ok {
			h = ic.Fresh()
		}
		hidden = h
	}
	seq, batch := x.Shape[0], x.Shape[1]
	y := TensorType(x.DType, seq, Const(dirs), batch, hidden)
	yh := TensorType(x.DType, Const(dirs), batch, hidden)
	if a.Layout != 0 {
		seq, batch = x.Shape[1], x.Shape[0]
		y = TensorType(x.DType, batch, seq, Const(dirs), hidden)
		yh = TensorType(x.DType, batch, Const(dirs), hidden)
	}
	return []Type{y, yh, yh}, nil
}
