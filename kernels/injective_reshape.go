package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Reshapes (row-major copies to a new shape: Reshape, Flatten, Squeeze, Unsqueeze) and
// replication (Expand, Tile).

// reshapeIndex maps an index of a tensor of extents to into the index of the same
// row-major element in a tensor of extents from (equal element counts). Extent-1 axes
// read 0; the rest are matched in groups of equal products, so that axes that only move
// or merge cost no division.
func reshapeIndex(from, to []int64, i []loopir.Expr) []loopir.Expr {
	src := zeros(len(from))
	var fa, ta []int // axes of extent > 1
	for a, e := range from {
		if e != 1 {
			fa = append(fa, a)
		}
	}
	for a, e := range to {
		if e != 1 {
			ta = append(ta, a)
		}
	}
	for _, e := range to {
		if e == 0 { // empty: no element is ever read
			return src
		}
	}
	for f, t := 0, 0; f < len(fa) || t < len(ta); {
		// grow a group from each side until the products agree
		f0, t0 := f, t
		pf, pt := int64(1), int64(1)
		for f == f0 || t == t0 || pf != pt {
			if pf <= pt && f < len(fa) {
				pf *= from[fa[f]]
				f++
			} else if t < len(ta) {
				pt *= to[ta[t]]
				t++
			} else {
				panic("BUG: reshape between shapes of different sizes")
			}
		}
		// linear position within the group, then split over the source axes
		lin := loopir.Expr(i64(0))
		for _, a := range ta[t0:t] {
			lin = add(mul(lin, i64(to[a])), i[a])
		}
		stride := pf
		for k, a := range fa[f0:f] {
			stride /= from[a]
			v := div(lin, i64(stride))
			if k > 0 {
				v = loopir.Bin(loopir.Mod, v, i64(from[a]))
			}
			src[a] = v
		}
	}
	return src
}

// reshapeTo copies x into a tensor of the given static extents in row-major order.
func reshapeTo(name string, x *te.Tensor, shape []int64) ([]*te.Tensor, error) {
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	nf, nt := int64(1), int64(1)
	for _, e := range from {
		nf *= e
	}
	for _, e := range shape {
		if e < 0 {
			return nil, Unsupported("%s to extent %d", name, e)
		}
		nt *= e
	}
	if nf != nt {
		return nil, Unsupported("%s of %v elements to %v", name, from, shape)
	}
	out := injCopy(name, x, Static(shape...), func(i []loopir.Expr) []loopir.Expr {
		return reshapeIndex(from, shape, i)
	})
	return []*te.Tensor{out}, nil
}

// computeReshape reads the target shape from the constant input 1 (0 copies the input
// extent unless allowzero, -1 is inferred), or else from the node's static output type.
func computeReshape(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	target, ok := ConstInts(in, 1)
	if !ok {
		if len(n.Outputs) > 0 && n.Outputs[0] != nil {
			if s, ok := n.Outputs[0].Type.ConstShape(); ok {
				shape := make([]int64, len(s))
				for k, d := range s {
					shape[k] = int64(d)
				}
				return reshapeTo("reshape", x, shape)
			}
		}
		return nil, Unsupported("Reshape to a run-time shape")
	}
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	allowZero := attrs[graph.ReshapeAttrs](n).AllowZero != 0
	shape := make([]int64, len(target))
	infer, known, total := -1, int64(1), int64(1)
	for _, e := range from {
		total *= e
	}
	for k, v := range target {
		switch {
		case v == 0 && !allowZero:
			if k >= len(from) {
				return nil, Unsupported("Reshape entry %d is 0 beyond the input rank %d", k, len(from))
			}
			shape[k] = from[k]
		case v == -1:
			if infer >= 0 {
				return nil, Unsupported("Reshape shape %v has two -1 entries", target)
			}
			infer = k
			continue
		case v < 0:
			return nil, Unsupported("Reshape extent %d", v)
		default:
			shape[k] = v
		}
		known *= shape[k]
	}
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, Unsupported("Reshape of %v to %v", from, target)
		}
		shape[infer] = total / known
	}
	return reshapeTo("reshape", x, shape)
}

// computeFlatten copies x to two dimensions split at axis.
func computeFlatten(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	axis, err := graph.FlattenAxis(attrs[graph.FlattenAttrs](n).Axis, len(from))
	if err != nil {
		return nil, Unsupported("Flatten: %v", err)
	}
	outer, inner := int64(1), int64(1)
	for k, e := range from {
		if k < axis {
			outer *= e
		} else {
			inner *= e
		}
	}
	return reshapeTo("flatten", x, []int64{outer, inner})
}

// computeSqueeze drops the listed extent-1 axes (constant input 1), or all of them.
func computeSqueeze(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	drop := make([]bool, len(from))
	if len(in) > 1 && in[1].Present() {
		axes, ok := ConstInts(in, 1)
		if !ok {
			return nil, Unsupported("Squeeze with run-time axes")
		}
		for _, a := range axes {
			ax, err := NormAxis(a, len(from))
			if err != nil {
				return nil, err
			}
			if from[ax] != 1 {
				return nil, Unsupported("Squeeze of axis %d with extent %d", ax, from[ax])
			}
			drop[ax] = true
		}
	} else {
		for k, e := range from {
			drop[k] = e == 1
		}
	}
	var shape []int64
	for k, e := range from {
		if !drop[k] {
			shape = append(shape, e)
		}
	}
	return reshapeTo("squeeze", x, shape)
}

// computeUnsqueeze inserts extent-1 axes at the positions (of the output) listed by the
// constant input 1.
func computeUnsqueeze(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	axes, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("Unsqueeze with run-time axes")
	}
	r := len(from) + len(axes)
	ins := make([]bool, r)
	for _, a := range axes {
		ax, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if ins[ax] {
			return nil, Unsupported("Unsqueeze axis %d given twice", ax)
		}
		ins[ax] = true
	}
	shape := make([]int64, 0, r)
	k := 0
	for a := 0; a < r; a++ {
		if ins[a] {
			shape = append(shape, 1)
		} else {
			shape = append(shape, from[k])
			k++
		}
	}
	return reshapeTo("unsqueeze", x, shape)
}

// computeExpand broadcasts x against the constant shape input 1, both ways (numpy).
func computeExpand(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	target, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("Expand to a run-time shape")
	}
	for _, v := range target {
		if v < 0 {
			return nil, Unsupported("Expand to extent %d", v)
		}
	}
	shape, err := BroadcastShape(x, te.Placeholder("expand_shape", x.DT, Static(target...)...))
	if err != nil {
		return nil, err
	}
	out := te.Compute("expand", shape, func(i []loopir.Expr) loopir.Expr { return BroadcastAt(x, i) })
	return []*te.Tensor{out}, nil
}

// computeTile repeats x along every axis by the constant repeats input 1.
func computeTile(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
	reps, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("Tile with run-time repeats")
	}
	if len(reps) != len(from) {
		return nil, Unsupported("Tile with %d repeats for rank %d", len(reps), len(from))
	}
	shape := make([]int64, len(from))
	for k, r := range reps {
		if r < 0 {
			return nil, Unsupported("Tile repeat %d", r)
		}
		shape[k] = from[k] * r
	}
	out := injCopy("tile", x, Static(shape...), func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, len(i))
		for k := range i {
			switch {
			case from[k] <= 1: // one element (or none: the loop is empty)
				src[k] = i64(0)
			case reps[k] == 1:
				src[k] = i[k]
			default:
				src[k] = loopir.Bin(loopir.Mod, i[k], i64(from[k]))
			}
		}
		return src
	})
	return []*te.Tensor{out}, nil
}
