package kernels

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// ErrNoKernel: the op (or this use of it: a dtype, a symbolic extent, an attribute value)
// has no compute definition. Wrapped with the node.
var ErrNoKernel = errors.New("no kernel")

// Input is one node input as a compute definition sees it: a placeholder with the
// input's element type and extents, and its value when it is a compile-time constant
// (axes, shapes, pads and clip bounds are read from Const; weights are read through T
// like any tensor). Both are nil for an omitted optional input.
type Input struct {
	T     *te.Tensor
	Const *tensor.Tensor
}

// Present reports whether the input was given.
func (in Input) Present() bool { return in.T != nil }

// ComputeFunc builds the te definition of a node on its inputs: one tensor per node
// output, in output order. Placeholders that the outputs never read are not kernel
// arguments (a constant read only as an attribute costs nothing at run time).
type ComputeFunc func(n *graph.Node, in []Input) ([]*te.Tensor, error)

// Registry maps each op to its compute definition; it is built explicitly (Default).
type Registry struct {
	compute [graph.NumOps]ComputeFunc
}

// NewRegistry assembles a registry from family tables; an op in two families is a bug.
func NewRegistry(families ...map[graph.Op]ComputeFunc) *Registry {
	r := &Registry{}
	for _, fam := range families {
		for op, f := range fam {
			if r.compute[op] != nil {
				panic("BUG: two compute definitions for " + op.String())
			}
			r.compute[op] = f
		}
	}
	return r
}

// Default is the registry of every definition in this package. Recurrent layers (LSTM,
// GRU, RNN) have none: a te compute cannot express a recurrence (step t reads the state
// of step t-1), so a target builds their loop nests directly (kernels/cpu).
func Default() *Registry {
	r := NewRegistry(elementwiseComputes(), injectiveComputes(), reduceComputes(), nnComputes(), layoutComputes(), generateComputes(), resizeComputes(), quantComputes(), nnMiscComputes(), trainingComputes(), signalComputes(), samplingComputes(), imageComputes())
	blockedPools(r)
	blockedBroadcasts(r)
	blockedResize(r)
	return r
}

// Compute returns op's definition.
func (r *Registry) Compute(op graph.Op) (ComputeFunc, bool) {
	if op >= graph.NumOps || r.compute[op] == nil {
		return nil, false
	}
	return r.compute[op], true
}

// Ops lists the ops that have a definition, in enum order.
func (r *Registry) Ops() []graph.Op {
	var out []graph.Op
	for op, f := range r.compute {
		if f != nil {
			out = append(out, graph.Op(op))
		}
	}
	return out
}

// Build runs op's definition on n, wrapping failures with the node.
func (r *Registry) Build(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	f, ok := r.Compute(n.Op)
	if !ok {
		return nil, fmt.Errorf("%v: %w for op %v", n, ErrNoKernel, n.Op)
	}
	outs, err := f(n, in)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	if len(outs) < len(n.Outputs) {
		return nil, fmt.Errorf("BUG: %v: definition returned %d tensors for %d outputs", n, len(outs), len(n.Outputs))
	}
	return outs[:len(n.Outputs)], nil
}

// Unsupported builds an ErrNoKernel error with its reason.
func Unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoKernel, fmt.Sprintf(format, args...))
}

// Extents returns the static extents of a tensor, or an error naming what is symbolic.
func Extents(t *te.Tensor) ([]int64, error) {
	out := make([]int64, len(t.Shape))
	for i, e := range t.Shape {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			return nil, Unsupported("%s: extent %d is symbolic (%v); this definition needs it static", t.Name, i, e)
		}
		out[i] = c.V
	}
	return out, nil
}

// Static turns extents into loopir constants.
func Static(ext ...int64) []loopir.Expr {
	out := make([]loopir.Expr, len(ext))
	for i, e := range ext {
		out[i] = loopir.Int(e)
	}
	return out
}

// ConstInts reads a constant integer input (axes, shapes, pads); ok is false when the
// input is absent or not constant.
func ConstInts(in []Input, i int) ([]int64, bool) {
	if i >= len(in) || in[i].Const == nil || !in[i].Const.DType.IsInt() {
		return nil, false
	}
	return in[i].Const.Int64s(), true
}

// NormAxis maps a possibly negative axis into [0, rank).
func NormAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, Unsupported("axis %d out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}
