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
// extent unless allowzero, -1 is inferred), or else from the node's output type (a shape
// computed at run time, such as a kiln.ShapeExpr over the symbols).
func computeReshape(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	allowZero := attrs[graph.ReshapeAttrs](n).AllowZero != 0
	target, ok := ConstInts(in, 1)
	if !ok || !isStatic(x.Shape) {
		if ok {
			shape, ok, err := reshapeTarget(x.Shape, target, allowZero)
			if err != nil {
				return nil, err
			}
			if ok {
				return reshapeExprs("reshape", x, shape)
			}
		}
		if shape, ok := outputShape(n, 0, in, x); ok {
			return reshapeExprs("reshape", x, shape)
		}
		return nil, Unsupported("Reshape to a run-time shape without an output type")
	}
	from, err := Extents(x)
	if err != nil {
		return nil, err
	}
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
	axis, err := graph.FlattenAxis(attrs[graph.FlattenAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Unsupported("Flatten: %v", err)
	}
	outer, inner := loopir.Expr(i64(1)), loopir.Expr(i64(1))
	for k, e := range x.Shape {
		if k < axis {
			outer = mul(outer, e)
		} else {
			inner = mul(inner, e)
		}
	}
	return reshapeExprs("flatten", x, []loopir.Expr{outer, inner})
}

// computeSqueeze drops the listed extent-1 axes (constant input 1), or all of them (then
// every extent must be constant).
func computeSqueeze(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	drop := make([]bool, len(x.Shape))
	if len(in) > 1 && in[1].Present() {
		axes, ok := ConstInts(in, 1)
		if !ok {
			return nil, Unsupported("Squeeze with run-time axes")
		}
		for _, a := range axes {
			ax, err := NormAxis(a, len(x.Shape))
			if err != nil {
				return nil, err
			}
			if !isOne(x.Shape[ax]) {
				return nil, Unsupported("Squeeze of axis %d with extent %v", ax, x.Shape[ax])
			}
			drop[ax] = true
		}
	} else {
		// every extent 1 at run time: a symbolic one would make the rank depend on it
		if !isStatic(x.Shape) {
			return nil, Unsupported("Squeeze without axes of symbolic extents %v", x.Shape)
		}
		for k, e := range x.Shape {
			drop[k] = isOne(e)
		}
	}
	var shape []loopir.Expr
	for k, e := range x.Shape {
		if !drop[k] {
			shape = append(shape, e)
		}
	}
	return reshapeExprs("squeeze", x, shape)
}

// computeUnsqueeze inserts extent-1 axes at the positions (of the output) listed by the
// constant input 1.
func computeUnsqueeze(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	axes, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("Unsqueeze with run-time axes")
	}
	r := len(x.Shape) + len(axes)
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
	shape := make([]loopir.Expr, 0, r)
	k := 0
	for a := 0; a < r; a++ {
		if ins[a] {
			shape = append(shape, i64(1))
		} else {
			shape = append(shape, x.Shape[k])
			k++
		}
	}
	return reshapeExprs("unsqueeze", x, shape)
}

// computeExpand broadcasts x against the shape input 1, both ways (numpy): a constant,
// or else the node's output type (a shape computed at run time). Symbolic extents of x
// are read through expandIndex, which is right whether they are 1 or not at run time.
func computeExpand(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	target, ok := ConstInts(in, 1)
	if !ok {
		shape, ok := outputShape(n, 0, in, x)
		if !ok || len(shape) < len(x.Shape) {
			return nil, Unsupported("Expand to a run-time shape without an output type")
		}
		out := te.Compute("expand", shape, func(i []loopir.Expr) loopir.Expr { return x.At(expandIndex(x, shape, i)...) })
		return []*te.Tensor{out}, nil
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
	if !isStatic(x.Shape) {
		out := te.Compute("expand", shape, func(i []loopir.Expr) loopir.Expr { return x.At(expandIndex(x, shape, i)...) })
		return []*te.Tensor{out}, nil
	}
	out := te.Compute("expand", shape, func(i []loopir.Expr) loopir.Expr { return BroadcastAt(x, i) })
	return []*te.Tensor{out}, nil
}

// computeTile repeats x along every axis by the constant repeats input 1.
func computeTile(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	reps, ok := ConstInts(in, 1)
	if !ok {
		return runtimeTile(n, in)
	}
	if len(reps) != len(x.Shape) {
		return nil, Unsupported("Tile with %d repeats for rank %d", len(reps), len(x.Shape))
	}
	shape := make([]loopir.Expr, len(x.Shape))
	for k, r := range reps {
		if r < 0 {
			return nil, Unsupported("Tile repeat %d", r)
		}
		shape[k] = mul(x.Shape[k], i64(r))
	}
	out := injCopy("tile", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, len(i))
		for k := range i {
			c, static := x.Shape[k].(*loopir.IntImm)
			switch {
			case static && c.V <= 1: // one element (or none: the loop is empty)
				src[k] = i64(0)
			case reps[k] == 1:
				src[k] = i[k]
			default:
				src[k] = safeDiv(loopir.Mod, i[k], x.Shape[k])
			}
		}
		return src
	})
	return []*te.Tensor{out}, nil
}

// runtimeTile repeats x by repeats known at run time: the output type's extents (bound
// on the host from the repeats) give the shape, and each index wraps around x's extent.
func runtimeTile(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	shape, ok := outputShape(n, 0, in, x)
	if !ok || len(shape) != len(x.Shape) {
		return nil, Unsupported("Tile with run-time repeats and no output type of the input's rank")
	}
	out := injCopy("tile", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, len(i))
		for k := range i {
			if c, static := x.Shape[k].(*loopir.IntImm); static && c.V <= 1 {
				src[k] = i64(0)
				continue
			}
			src[k] = safeDiv(loopir.Mod, i[k], x.Shape[k])
		}
		return src
	})
	return []*te.Tensor{out}, nil
}
