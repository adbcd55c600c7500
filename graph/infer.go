package graph

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kilnrt/kiln/tensor"
)

// ErrInfer is wrapped by type/shape inference failures (bad model input, not a bug).
var ErrInfer = errors.New("type inference failed")

// InferCtx is what an InferFunc may use besides the node: fresh symbols for extents that
// cannot be known statically.
type InferCtx struct {
	M *Module
}

// Fresh returns a new symbolic extent. With no module (tests), a local counter is used.
func (ic *InferCtx) Fresh() Dim {
	if ic == nil || ic.M == nil {
		return Sym(fmt.Sprintf("_t%d", localFresh.Add(1)))
	}
	return ic.M.FreshSymbol()
}

var localFresh atomic.Int64

// Inferf builds an inference error that names the node.
func Inferf(n *Node, format string, args ...any) error {
	return fmt.Errorf("%w: %v: %s", ErrInfer, n, fmt.Sprintf(format, args...))
}

// InType returns the type of input i, and false when the input is omitted.
func InType(n *Node, i int) (Type, bool) {
	v := n.Input(i)
	if v == nil {
		return Type{}, false
	}
	return v.Type, true
}

// TensorIn returns input i's type and checks that it is a ranked tensor.
func TensorIn(n *Node, i int) (Type, error) {
	t, ok := InType(n, i)
	if !ok {
		return Type{}, Inferf(n, "input %d is missing", i)
	}
	if t.Kind != KindTensor {
		return Type{}, Inferf(n, "input %d is a %v, want a tensor", i, t)
	}
	return t, nil
}

// BroadcastDims applies numpy broadcasting to symbolic shapes. Two different symbols
// broadcast to the first (the model promises they agree at run time, or one is 1).
func BroadcastDims(shapes ...[]Dim) ([]Dim, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]Dim, rank)
	for i := range out {
		out[i] = Const(1)
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			cur := out[off+i]
			switch {
			case d.Equal(cur):
			case isOne(d):
			case isOne(cur):
				out[off+i] = d
			case cur.IsConst() && d.IsConst():
				return nil, fmt.Errorf("cannot broadcast %s with %s", dimsString(shapes[0]), dimsString(s))
			case !cur.IsConst():
				// keep a static extent when one side is static: it is the more precise fact
				if d.IsConst() {
					out[off+i] = d
				}
			}
		}
	}
	return out, nil
}

func isOne(d Dim) bool { v, ok := d.Value(); return ok && v == 1 }

// NormAxis maps a possibly negative axis into [0, rank), naming the node on error.
func NormAxis(n *Node, axis int64, rank int) (int, error) {
	a, err := tensor.NormAxis(axis, rank)
	if err != nil {
		return 0, Inferf(n, "%v", err)
	}
	return a, nil
}

// SameAs returns an InferFunc whose single output has input i's type (Known dropped).
func SameAs(i int) InferFunc {
	return func(_ *InferCtx, n *Node) ([]Type, error) {
		t, ok := InType(n, i)
		if !ok {
			return nil, Inferf(n, "input %d is missing", i)
		}
		t.Known = nil
		return []Type{t}, nil
	}
}

// ConstInt64s returns the values of a constant integer input, or of one whose symbolic
// values are all known constants (Type.Known); ok is false otherwise.
func ConstInt64s(n *Node, i int) ([]int64, bool) {
	v := n.Input(i)
	if v == nil {
		return nil, false
	}
	if v.Const != nil && (v.Const.DType.IsInt() || v.Const.DType == tensor.Bool) {
		return v.Const.Int64s(), true
	}
	if v.Type.Known == nil {
		return nil, false
	}
	out := make([]int64, len(v.Type.Known))
	for j, d := range v.Type.Known {
		x, ok := d.Value()
		if !ok {
			return nil, false
		}
		out[j] = x
	}
	return out, true
}

// KnownDims returns the symbolic element values of an integer input, when known.
func KnownDims(n *Node, i int) ([]Dim, bool) {
	v := n.Input(i)
	if v == nil || v.Type.Known == nil {
		return nil, false
	}
	return v.Type.Known, true
}

// FreshShape returns rank fresh extents.
func (ic *InferCtx) FreshShape(rank int) []Dim {
	out := make([]Dim, rank)
	for i := range out {
		out[i] = ic.Fresh()
	}
	return out
}

// InferNode checks the node's attributes (CheckAttrs), runs the op's InferFunc, checks
// the result count and checks each output type's size (CheckTypeSize).
func InferNode(ic *InferCtx, n *Node) ([]Type, error) {
	info := n.Op.Info()
	if info == nil {
		return nil, fmt.Errorf("%w: %v is not supported", ErrInfer, n)
	}
	if err := CheckAttrs(n); err != nil {
		return nil, err
	}
	ts, err := info.Infer(ic, n)
	if err != nil && errors.Is(err, ErrInfer) && hasUnknownRank(n) {
		if probed, ok := probeRanks(n); ok {
			ts, err = probed, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if len(ts) < len(n.Outputs) {
		return nil, fmt.Errorf("BUG: %v: inference returned %d types for %d outputs", n, len(ts), len(n.Outputs))
	}
	ts = ts[:len(n.Outputs)]
	for i, t := range ts {
		if err := CheckTypeSize(t); err != nil {
			return nil, fmt.Errorf("%w: %v: output %d (%s): %w", ErrInfer, n, i, n.Outputs[i].Name, err)
		}
	}
	return ts, nil
}

// CheckTypeSize checks that a tensor type (a sequence's or optional's element type
// included) has no negative constant extent and that its constant extents and element
// size multiply to a byte count within an int64 (tensor.CheckedSize), so that every
// size, offset and stride computed from a static shape later fits. Symbolic extents
// are checked when they are bound.
func CheckTypeSize(t Type) error {
	if t.Elem != nil {
		return CheckTypeSize(*t.Elem)
	}
	if t.Kind != KindTensor || t.UnknownRank || !t.DType.Valid() {
		return nil
	}
	ext := make([]int64, 0, len(t.Shape))
	for _, d := range t.Shape {
		if d.Overflowed() {
			return fmt.Errorf("%w: an extent of %v overflows int64", tensor.ErrTooLarge, t)
		}
		if v, ok := d.Value(); ok {
			ext = append(ext, v)
		}
	}
	_, _, err := tensor.CheckedSize(t.DType, ext)
	return err
}

// maxProbeRank is the highest rank probeRanks tries for an input of unknown rank.
const maxProbeRank = 8

// hasUnknownRank reports whether an input of n is a tensor (or a sequence or optional of
// tensors) of unknown rank.
func hasUnknownRank(n *Node) bool {
	for _, v := range n.Inputs {
		if v != nil && elemType(v.Type).UnknownRank {
			return true
		}
	}
	return false
}

func elemType(t Type) Type {
	for t.Elem != nil {
		t = *t.Elem
	}
	return t
}

// probeRanks types the outputs of a node whose inference refused an input of unknown
// rank (an op that needs its input's rank, as a subgraph's value whose rank the model
// leaves open feeds it). It runs the op's inference again with every such input given
// rank 0, 1, ... maxProbeRank in turn, each extent a fresh symbol; at the first rank
// inference accepts, the node is well typed for some rank, and its outputs get the kind
// and element types that inference found, with unknown rank (shapes are checked when
// the node runs). ok is false when no rank is accepted: then the node is wrong for
// every rank, and the original error stands.
func probeRanks(n *Node) (ts []Type, ok bool) {
	info := n.Op.Info()
	ic := &InferCtx{} // the probes' symbols go nowhere
	for r := 0; r <= maxProbeRank; r++ {
		probe := *n
		probe.Inputs = make([]*Value, len(n.Inputs))
		for i, v := range n.Inputs {
			probe.Inputs[i] = v
			if v != nil && elemType(v.Type).UnknownRank {
				pv := *v
				pv.Type = withRank(ic, v.Type, r)
				probe.Inputs[i] = &pv
			}
		}
		got, err := info.Infer(ic, &probe)
		if err != nil {
			continue
		}
		out := make([]Type, len(got))
		for i, t := range got {
			out[i] = unknownRankOf(t)
		}
		return out, true
	}
	return nil, false
}

// withRank replaces the unknown rank of t (or of its element type) by r fresh extents.
func withRank(ic *InferCtx, t Type, r int) Type {
	if t.Elem != nil {
		e := withRank(ic, *t.Elem, r)
		t.Elem = &e
		return t
	}
	t.UnknownRank, t.Shape, t.Known = false, ic.FreshShape(r), nil
	return t
}

// unknownRankOf keeps t's kind and element type and forgets its shape.
func unknownRankOf(t Type) Type {
	if t.Elem != nil {
		e := unknownRankOf(*t.Elem)
		return Type{Kind: t.Kind, Elem: &e}
	}
	return Type{Kind: t.Kind, DType: t.DType, UnknownRank: true}
}
