package kernels

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// BroadcastShape applies numpy broadcasting to the tensors' extents: axes align on the
// right; an extent of 1 stretches; a symbolic extent against a constant other than 1
// takes the constant (the model promises they agree at run time).
func BroadcastShape(ts ...*te.Tensor) ([]loopir.Expr, error) {
	rank := 0
	for _, t := range ts {
		rank = max(rank, len(t.Shape))
	}
	out := make([]loopir.Expr, rank)
	for k := range out {
		out[k] = loopir.Int(1)
	}
	for _, t := range ts {
		off := rank - len(t.Shape)
		for j, e := range t.Shape {
			cur := out[off+j]
			switch {
			case isOne(e):
			case isOne(cur):
				out[off+j] = e
			default:
				ce, ok1 := e.(*loopir.IntImm)
				cc, ok2 := cur.(*loopir.IntImm)
				if ok1 && ok2 && ce.V != cc.V {
					return nil, Unsupported("cannot broadcast extents %d and %d", cc.V, ce.V)
				}
				if ok1 {
					out[off+j] = e
				}
			}
		}
	}
	return out, nil
}

func isOne(e loopir.Expr) bool {
	c, ok := e.(*loopir.IntImm)
	return ok && c.V == 1
}

// BroadcastAt reads t at the index i of a broadcast result of rank len(i): t's axes
// align on the right and its extent-1 axes read index 0.
func BroadcastAt(t *te.Tensor, i []loopir.Expr) loopir.Expr {
	return broadcastAt(t, i, nil)
}

// broadcastAt is BroadcastAt knowing the result's shape: an axis of extent 1 on both
// sides reads the result's index (which is 0), so an input of the result's own shape is
// read at exactly the result's iterators (schedules that move consumers rely on it).
func broadcastAt(t *te.Tensor, i []loopir.Expr, shape []loopir.Expr) loopir.Expr {
	off := len(i) - len(t.Shape)
	idx := make([]loopir.Expr, len(t.Shape))
	for j := range idx {
		if isOne(t.Shape[j]) && (shape == nil || !isOne(shape[off+j])) {
			idx[j] = loopir.Int(0)
		} else {
			idx[j] = i[off+j]
		}
	}
	return t.At(idx...)
}

// Map builds out[i] = f(the inputs read at i), broadcasting them against each other.
func Map(name string, f func(x []loopir.Expr) loopir.Expr, ts ...*te.Tensor) (*te.Tensor, error) {
	shape, err := BroadcastShape(ts...)
	if err != nil {
		return nil, err
	}
	return te.Compute(name, shape, func(i []loopir.Expr) loopir.Expr {
		xs := make([]loopir.Expr, len(ts))
		for k, t := range ts {
			xs[k] = broadcastAt(t, i, shape)
		}
		return f(xs)
	}), nil
}
