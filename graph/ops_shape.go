package graph

import (
	"fmt"
	"math"
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Shape and data-movement ops. Their inference is where symbolic shapes are made: the
// values of small integer tensors (Type.Known) flow through Shape → Gather → Unsqueeze →
// Concat → Reshape, so that a reshape to "[b, s, 4, 64]" keeps its symbols.

// AbsentInt marks an INT attribute that was not given, where absence has a meaning.
const AbsentInt = math.MinInt64

// ReshapeAttrs as in ONNX.
type ReshapeAttrs struct {
	AllowZero int64 `attr:"allowzero"`
}

// TransposeAttrs: Perm nil means reverse.
type TransposeAttrs struct {
	Perm []int64 `attr:"perm"`
}

// AxisAttrs is shared by ops with a required axis (Concat).
type AxisAttrs struct {
	Axis int64 `attr:"axis" required:"true"`
}

// SplitAttrs as in ONNX (split sizes are input 1).
type SplitAttrs struct {
	Axis       int64 `attr:"axis"`
	NumOutputs int64 `attr:"num_outputs"`
}

// GatherAttrs is shared by Gather and GatherElements.
type GatherAttrs struct {
	Axis int64 `attr:"axis"`
}

// GatherNDAttrs as in ONNX.
type GatherNDAttrs struct {
	BatchDims int64 `attr:"batch_dims"`
}

// ScatterElementsAttrs as in ONNX.
type ScatterElementsAttrs struct {
	Axis      int64  `attr:"axis"`
	Reduction string `attr:"reduction" default:"none"`
}

// ScatterNDAttrs as in ONNX.
type ScatterNDAttrs struct {
	Reduction string `attr:"reduction" default:"none"`
}

// PadAttrs as in ONNX (pads, constant_value and axes are inputs).
type PadAttrs struct {
	Mode string `attr:"mode" default:"constant"`
}

// ShapeAttrs: End is AbsentInt when not given (meaning the rank).
type ShapeAttrs struct {
	Start int64 `attr:"start"`
	End   int64 `attr:"end" default:"-9223372036854775808"`
}

// ConstantOfShapeAttrs: Value nil means float32 zero.
type ConstantOfShapeAttrs struct {
	Value *tensor.Tensor `attr:"value"`
}

// FlattenAttrs as in ONNX.
type FlattenAttrs struct {
	Axis int64 `attr:"axis" default:"1"`
}

// DepthToSpaceAttrs as in ONNX (Mode is ignored by SpaceToDepth).
type DepthToSpaceAttrs struct {
	BlockSize int64  `attr:"blocksize" required:"true" min:"1"`
	Mode      string `attr:"mode" default:"DCR"`
}

// SpaceToDepthAttrs as in ONNX.
type SpaceToDepthAttrs struct {
	BlockSize int64 `attr:"blocksize" required:"true" min:"1"`
}

// OneHotAttrs as in ONNX.
type OneHotAttrs struct {
	Axis int64 `attr:"axis" default:"-1"`
}

// TriluAttrs as in ONNX (k is input 1).
type TriluAttrs struct {
	Upper int64 `attr:"upper" default:"1"`
}

// CompressAttrs: Axis is AbsentInt when not given (flatten first).
type CompressAttrs struct {
	Axis int64 `attr:"axis" default:"-9223372036854775808"`
}

// EyeLikeAttrs: DType 0 means the input's dtype.
type EyeLikeAttrs struct {
	DType int64 `attr:"dtype"`
	K     int64 `attr:"k"`
}

func shapeOps() []OpInfo {
	row := func(op Op, minIn, maxIn, minOut, maxOut int, attrs reflect.Type, p Pattern, f Flags, inf InferFunc) OpInfo {
		return OpInfo{Op: op, MinIn: minIn, MaxIn: maxIn, MinOut: minOut, MaxOut: maxOut, Attrs: attrs, Pattern: p, Flags: f, Infer: inf}
	}
	return []OpInfo{
		row(OpReshape, 2, 2, 1, 1, reflect.TypeFor[ReshapeAttrs](), Injective, View, inferReshape),
		row(OpTranspose, 1, 1, 1, 1, reflect.TypeFor[TransposeAttrs](), Injective, 0, inferTranspose),
		row(OpConcat, 1, -1, 1, 1, reflect.TypeFor[AxisAttrs](), Injective, 0, inferConcat),
		row(OpSplit, 1, 2, 1, -1, reflect.TypeFor[SplitAttrs](), Injective, 0, inferSplit),
		row(OpSlice, 3, 5, 1, 1, nil, Injective, 0, inferSlice),
		row(OpGather, 2, 2, 1, 1, reflect.TypeFor[GatherAttrs](), Injective, 0, inferGather),
		row(OpGatherElements, 2, 2, 1, 1, reflect.TypeFor[GatherAttrs](), Injective, 0, inferGatherElements),
		row(OpGatherND, 2, 2, 1, 1, reflect.TypeFor[GatherNDAttrs](), Injective, 0, inferGatherND),
		row(OpScatterElements, 3, 3, 1, 1, reflect.TypeFor[ScatterElementsAttrs](), Opaque, 0, SameAs(0)),
		row(OpScatterND, 3, 3, 1, 1, reflect.TypeFor[ScatterNDAttrs](), Opaque, 0, SameAs(0)),
		row(OpSqueeze, 1, 2, 1, 1, nil, Injective, View, inferSqueeze),
		row(OpUnsqueeze, 2, 2, 1, 1, nil, Injective, View, inferUnsqueeze),
		row(OpExpand, 2, 2, 1, 1, nil, Broadcast, 0, inferExpand),
		row(OpTile, 2, 2, 1, 1, nil, Injective, 0, inferTile),
		row(OpPad, 2, 4, 1, 1, reflect.TypeFor[PadAttrs](), Injective, 0, inferPad),
		row(OpShape, 1, 1, 1, 1, reflect.TypeFor[ShapeAttrs](), Opaque, 0, inferShapeOp),
		row(OpSize, 1, 1, 1, 1, nil, Opaque, 0, inferSize),
		row(OpConstantOfShape, 1, 1, 1, 1, reflect.TypeFor[ConstantOfShapeAttrs](), Opaque, DataDependent, inferConstantOfShape),
		row(OpRange, 3, 3, 1, 1, nil, Opaque, DataDependent, inferRange),
		row(OpFlatten, 1, 1, 1, 1, reflect.TypeFor[FlattenAttrs](), Injective, View, inferFlatten),
		row(OpDepthToSpace, 1, 1, 1, 1, reflect.TypeFor[DepthToSpaceAttrs](), Injective, 0, inferSpaceDepth(true)),
		row(OpSpaceToDepth, 1, 1, 1, 1, reflect.TypeFor[SpaceToDepthAttrs](), Injective, 0, inferSpaceDepth(false)),
		row(OpOneHot, 3, 3, 1, 1, reflect.TypeFor[OneHotAttrs](), Opaque, 0, inferOneHot),
		row(OpNonZero, 1, 1, 1, 1, nil, Opaque, DataDependent, inferNonZero),
		row(OpTrilu, 1, 2, 1, 1, reflect.TypeFor[TriluAttrs](), Injective, 0, SameAs(0)),
		row(OpCompress, 2, 2, 1, 1, reflect.TypeFor[CompressAttrs](), Opaque, DataDependent, inferCompress),
		row(OpEyeLike, 1, 1, 1, 1, reflect.TypeFor[EyeLikeAttrs](), Opaque, 0, inferEyeLike),
	}
}

func ranked(n *Node, i int) (Type, bool, error) {
	t, err := TensorIn(n, i)
	if err != nil {
		return Type{}, false, err
	}
	return t, !t.UnknownRank, nil
}

func unknownRank(dt tensor.DType) []Type {
	return []Type{{Kind: KindTensor, DType: dt, UnknownRank: true}}
}

// shapeValues returns the symbolic values of a 1-D integer input (constant or Known).
func shapeValues(n *Node, i int) ([]Dim, bool) {
	if c := n.ConstInput(i); c != nil && c.DType.IsInt() {
		vals := c.Int64s()
		out := make([]Dim, len(vals))
		for k, v := range vals {
			out[k] = Const(v)
		}
		return out, true
	}
	return KnownDims(n, i)
}

// staticLen returns the static length of a 1-D input.
func staticLen(n *Node, i int) (int, bool) {
	t, ok := InType(n, i)
	if !ok || t.UnknownRank || len(t.Shape) != 1 {
		return 0, false
	}
	v, ok := t.Shape[0].Value()
	return int(v), ok
}

func product(ds []Dim) Dim {
	p := Const(1)
	for _, d := range ds {
		p = p.Mul(d)
	}
	return p
}

func inferReshape(ic *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	target, ok := shapeValues(n, 1)
	if !ok {
		if l, ok := staticLen(n, 1); ok {
			return []Type{TensorType(x.DType, ic.FreshShape(l)...)}, nil
		}
		return unknownRank(x.DType), nil
	}
	allowZero := n.Attrs.(*ReshapeAttrs).AllowZero != 0
	out := make([]Dim, len(target))
	infer := -1
	for i, d := range target {
		v, isConst := d.Value()
		switch {
		case isConst && v == 0 && !allowZero && x.UnknownRank:
			out[i] = ic.Fresh() // the input's extent, checked when it runs
		case isConst && v == 0 && !allowZero:
			if i >= len(x.Shape) {
				return nil, Inferf(n, "shape entry %d is 0 but the input has rank %d", i, x.Rank())
			}
			out[i] = x.Shape[i]
		case isConst && v == -1:
			if infer >= 0 {
				return nil, Inferf(n, "more than one -1 in the target shape")
			}
			infer = i
		case isConst && v < -1:
			return nil, Inferf(n, "invalid target extent %d", v)
		default:
			out[i] = d
		}
	}
	if infer >= 0 {
		out[infer] = ic.Fresh()
		if !x.UnknownRank {
			rest := Const(1)
			for i, d := range out {
				if i != infer {
					rest = rest.Mul(d)
				}
			}
			in, inOK := product(x.Shape).Value()
			if r, ok := rest.Value(); ok && inOK && (r == 0 || in%r != 0) {
				return nil, Inferf(n, "cannot reshape %v (%d elements) to %v: the other extents' product %d does not divide it", x.Shape, in, target, r)
			}
			if q, ok := product(x.Shape).Div(rest); ok {
				out[infer] = q
			}
		}
	} else if !x.UnknownRank {
		in, inOK := product(x.Shape).Value()
		if o, ok := product(out).Value(); ok && inOK && o != in {
			return nil, Inferf(n, "cannot reshape %v (%d elements) to %v (%d elements)", x.Shape, in, out, o)
		}
	}
	t := TensorType(x.DType, out...)
	if x.Known != nil && len(out) <= 1 {
		t.Known = x.Known
	}
	return []Type{t}, nil
}

func inferTranspose(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	perm := n.Attrs.(*TransposeAttrs).Perm
	r := len(x.Shape)
	if perm == nil {
		for i := r - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != r {
		return nil, Inferf(n, "perm %v for rank %d", perm, r)
	}
	out := make([]Dim, r)
	seen := make([]bool, r)
	for i, p := range perm {
		a, err := NormAxis(n, p, r)
		if err != nil {
			return nil, err
		}
		if seen[a] {
			return nil, Inferf(n, "perm %v repeats an axis", perm)
		}
		seen[a] = true
		out[i] = x.Shape[a]
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferConcat(ic *InferCtx, n *Node) ([]Type, error) {
	first, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	var out []Dim
	var known []Dim
	knownOK := true
	axis := -1
	for i := range n.Inputs {
		t, ok, err := ranked(n, i)
		if err != nil {
			return nil, err
		}
		if !ok {
			return unknownRank(first.DType), nil
		}
		if t.DType != first.DType {
			return nil, Inferf(n, "inputs have dtypes %v and %v", first.DType, t.DType)
		}
		if axis < 0 {
			if axis, err = NormAxis(n, n.Attrs.(*AxisAttrs).Axis, len(t.Shape)); err != nil {
				return nil, err
			}
			out = append([]Dim{}, t.Shape...)
		} else {
			if len(t.Shape) != len(out) {
				return nil, Inferf(n, "inputs have ranks %d and %d", len(out), len(t.Shape))
			}
			out[axis] = out[axis].Add(t.Shape[axis])
			for k := range out {
				if k != axis && !out[k].Equal(t.Shape[k]) && out[k].IsConst() && t.Shape[k].IsConst() {
					return nil, Inferf(n, "inputs disagree on axis %d: %v vs %v", k, out[k], t.Shape[k])
				}
			}
		}
		if t.Known == nil {
			knownOK = false
		} else {
			known = append(known, t.Known...)
		}
	}
	res := TensorType(first.DType, out...)
	if knownOK && len(out) == 1 {
		res.Known = known
	}
	return []Type{res}, nil
}

func inferSplit(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	k := len(n.Outputs)
	out := make([]Type, k)
	if !ok {
		for i := range out {
			out[i] = unknownRank(x.DType)[0]
		}
		return out, nil
	}
	axis, err := NormAxis(n, n.Attrs.(*SplitAttrs).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	sizes := make([]Dim, k)
	if vals, ok := ConstInt64s(n, 1); ok {
		if len(vals) != k {
			return nil, Inferf(n, "%d split sizes for %d outputs", len(vals), k)
		}
		for i, v := range vals {
			sizes[i] = Const(v)
		}
	} else if n.Input(1) == nil {
		if v, ok := x.Shape[axis].Value(); ok {
			chunk := (v + int64(k) - 1) / int64(k)
			for i := range sizes {
				sizes[i] = Const(max(0, min(chunk, v-int64(i)*chunk)))
			}
		} else if q, ok := x.Shape[axis].Div(Const(int64(k))); ok {
			for i := range sizes {
				sizes[i] = q
			}
		} else {
			for i := range sizes {
				sizes[i] = ic.Fresh()
			}
		}
	} else {
		for i := range sizes {
			sizes[i] = ic.Fresh()
		}
	}
	for i := range out {
		s := append([]Dim{}, x.Shape...)
		s[axis] = sizes[i]
		out[i] = TensorType(x.DType, s...)
	}
	return out, nil
}

// sliceExtent computes the extent of a slice of a (possibly symbolic) dim d.
func sliceExtent(ic *InferCtx, d Dim, start, end, step int64) Dim {
	if v, ok := d.Value(); ok {
		s, e := clampSlice(start, end, step, v)
		if step > 0 && e > s {
			return Const((e-s-1)/step + 1) // e-s+step-1 could overflow
		}
		if step < 0 && s > e {
			return Const((s-e-1)/-max(step, -math.MaxInt64) + 1)
		}
		return Const(0)
	}
	if step == 1 && end >= math.MaxInt32 {
		switch {
		case start >= 0:
			return d.Sub(Const(start))
		default:
			return Const(-start) // assumes the dim is at least -start long
		}
	}
	if step == 1 && start == 0 && end < 0 {
		return d.Add(Const(end))
	}
	// a static end of a symbolic dim: min(d, end) - start, which no polynomial is (the
	// dim may be shorter: an NMS's selection truncated to its first 150), so a symbol
	// of its own, bound at run time or refused where nothing binds it
	return ic.Fresh()
}

// SymbolicSliceEnds returns a Slice's ends when they are known but not all constant
// (a shape expression: gpt2's causal mask ends at seq), else nil.
func SymbolicSliceEnds(n *Node) []Dim {
	v := n.Input(2)
	if v == nil || v.Const != nil || v.Type.Known == nil {
		return nil
	}
	for _, d := range v.Type.Known {
		if !d.IsConst() {
			return v.Type.Known
		}
	}
	return nil
}

// symbolicSliceExtent is the extent of a unit-step slice from a constant start to a
// symbolic end e: e - start, assuming start <= e <= the dim (the compiler checks e
// against a static dim at run time: the compiler's checkSliceEnds); anything else is a
// fresh symbol.
func symbolicSliceExtent(ic *InferCtx, d Dim, start int64, e Dim, step int64) Dim {
	if v, ok := e.Value(); ok {
		return sliceExtent(ic, d, start, v, step)
	}
	if step != 1 || start < 0 {
		return ic.Fresh()
	}
	if _, static := d.Value(); !static && !d.Equal(e) {
		return ic.Fresh()
	}
	return e.Sub(Const(start))
}

// clampSlice applies ONNX Slice clamping to [start, end) for a dim of extent v.
func clampSlice(start, end, step, v int64) (int64, int64) {
	if start < 0 {
		start += v
	}
	if end < 0 {
		end += v
	}
	if step > 0 {
		start = max(0, min(start, v))
		end = max(0, min(end, v))
	} else {
		start = max(-1, min(start, v-1))
		end = max(-1, min(end, v-1))
	}
	return start, end
}

func inferSlice(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	starts, ok1 := ConstInt64s(n, 1)
	ends, ok2 := ConstInt64s(n, 2)
	symEnds := SymbolicSliceEnds(n)
	if ok1 && !ok2 && len(symEnds) == len(starts) {
		ends, ok2 = make([]int64, len(starts)), true // placeholders: symEnds decide
	}
	if !ok1 || !ok2 || len(starts) != len(ends) {
		return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
	}
	axes := make([]int64, len(starts))
	for i := range axes {
		axes[i] = int64(i)
	}
	if n.Input(3) != nil {
		a, ok := ConstInt64s(n, 3)
		if !ok || len(a) != len(starts) {
			return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
		}
		axes = a
	}
	steps := make([]int64, len(starts))
	for i := range steps {
		steps[i] = 1
	}
	if n.Input(4) != nil {
		s, ok := ConstInt64s(n, 4)
		if !ok || len(s) != len(starts) {
			return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
		}
		steps = s
	}
	out := append([]Dim{}, x.Shape...)
	for i, a := range axes {
		ax, err := NormAxis(n, a, len(out))
		if err != nil {
			return nil, err
		}
		if steps[i] == 0 {
			return nil, Inferf(n, "slice step 0")
		}
		if symEnds != nil {
			out[ax] = symbolicSliceExtent(ic, x.Shape[ax], starts[i], symEnds[i], steps[i])
			continue
		}
		out[ax] = sliceExtent(ic, x.Shape[ax], starts[i], ends[i], steps[i])
	}
	t := TensorType(x.DType, out...)
	if x.Known != nil && len(out) == 1 && len(axes) == 1 {
		s, e := clampSlice(starts[0], ends[0], steps[0], int64(len(x.Known)))
		for i := s; (steps[0] > 0 && i < e) || (steps[0] < 0 && i > e); {
			t.Known = append(t.Known, x.Known[i])
			next, ok := tensor.SignedAdd(i, steps[0])
			if !ok { // a step past every extent
				break
			}
			i = next
		}
		if t.Known == nil {
			t.Known = []Dim{}
		}
	}
	return []Type{t}, nil
}

func inferGather(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	idx, ok2, err := ranked(n, 1)
	if err != nil {
		return nil, err
	}
	if !ok || !ok2 {
		return unknownRank(x.DType), nil
	}
	axis, err := NormAxis(n, n.Attrs.(*GatherAttrs).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := append(append(append([]Dim{}, x.Shape[:axis]...), idx.Shape...), x.Shape[axis+1:]...)
	t := TensorType(x.DType, out...)
	if x.Known != nil && len(x.Shape) == 1 {
		if vals, ok := ConstInt64s(n, 1); ok && len(idx.Shape) <= 1 {
			for _, v := range vals {
				if v < 0 {
					v += int64(len(x.Known))
				}
				if v < 0 || v >= int64(len(x.Known)) {
					return nil, Inferf(n, "index %d out of range for %d values", v, len(x.Known))
				}
				t.Known = append(t.Known, x.Known[v])
			}
		}
	}
	return []Type{t}, nil
}

func inferGatherElements(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	idx, err := TensorIn(n, 1)
	if err != nil {
		return nil, err
	}
	idx.DType, idx.Known = x.DType, nil
	return []Type{idx}, nil
}

func inferGatherND(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	idx, ok2, err := ranked(n, 1)
	if err != nil {
		return nil, err
	}
	if !ok || !ok2 || len(idx.Shape) == 0 {
		return unknownRank(x.DType), nil
	}
	b := int(n.Attrs.(*GatherNDAttrs).BatchDims)
	last, isConst := idx.Shape[len(idx.Shape)-1].Value()
	if !isConst || b < 0 || b+int(last) > len(x.Shape) {
		return unknownRank(x.DType), nil
	}
	out := append(append([]Dim{}, idx.Shape[:len(idx.Shape)-1]...), x.Shape[b+int(last):]...)
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferSqueeze(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	drop := map[int]bool{}
	if n.Input(1) != nil {
		axes, ok := ConstInt64s(n, 1)
		if !ok {
			// run-time axes of a static count: each drops one axis (the run time
			// checks that they differ)
			if l, ok := staticLen(n, 1); ok && l <= len(x.Shape) {
				return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape)-l)...)}, nil
			}
			return unknownRank(x.DType), nil
		}
		for _, a := range axes {
			ax, err := NormAxis(n, a, len(x.Shape))
			if err != nil {
				return nil, err
			}
			drop[ax] = true
		}
	} else {
		for i, d := range x.Shape {
			if v, ok := d.Value(); ok && v == 1 {
				drop[i] = true
			} else if !ok {
				return unknownRank(x.DType), nil
			}
		}
	}
	var out []Dim
	for i, d := range x.Shape {
		if !drop[i] {
			out = append(out, d)
		}
	}
	t := TensorType(x.DType, out...)
	t.Known = x.Known
	return []Type{t}, nil
}

func inferUnsqueeze(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	axes, ok := ConstInt64s(n, 1)
	if !ok {
		if l, ok := staticLen(n, 1); ok {
			return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape)+l)...)}, nil
		}
		return unknownRank(x.DType), nil
	}
	r := len(x.Shape) + len(axes)
	ins := map[int]bool{}
	for _, a := range axes {
		ax, err := NormAxis(n, a, r)
		if err != nil {
			return nil, err
		}
		if ins[ax] {
			return nil, Inferf(n, "axes %v repeat an axis", axes)
		}
		ins[ax] = true
	}
	out := make([]Dim, 0, r)
	k := 0
	for i := 0; i < r; i++ {
		if ins[i] {
			out = append(out, Const(1))
		} else {
			out = append(out, x.Shape[k])
			k++
		}
	}
	t := TensorType(x.DType, out...)
	t.Known = x.Known
	return []Type{t}, nil
}

func inferExpand(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	target, ok := shapeValues(n, 1)
	if !ok {
		l, ok := staticLen(n, 1)
		if !ok {
			return unknownRank(x.DType), nil
		}
		// a target known only at run time: an extent of x other than 1 stays when it is
		// static (the target's is 1 or equal); one that is symbolic may be 1 and so
		// becomes fresh too
		out := ic.FreshShape(max(l, len(x.Shape)))
		off := len(out) - len(x.Shape)
		for i, d := range x.Shape {
			if v, ok := d.Value(); ok && v != 1 {
				out[off+i] = d
			}
		}
		return []Type{TensorType(x.DType, out...)}, nil
	}
	out, err := BroadcastDims(x.Shape, target)
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferTile(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	reps, ok := shapeValues(n, 1)
	if !ok || len(reps) != len(x.Shape) {
		return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
	}
	out := make([]Dim, len(x.Shape))
	for i := range out {
		out[i] = x.Shape[i].Mul(reps[i])
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferPad(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	r := len(x.Shape)
	pads, ok := ConstInt64s(n, 1)
	axes := make([]int64, r)
	for i := range axes {
		axes[i] = int64(i)
	}
	if n.Input(3) != nil {
		a, ok2 := ConstInt64s(n, 3)
		if !ok2 {
			ok = false
		}
		axes = a
	}
	if !ok || len(pads) != 2*len(axes) {
		return []Type{TensorType(x.DType, ic.FreshShape(r)...)}, nil
	}
	out := append([]Dim{}, x.Shape...)
	for i, a := range axes {
		ax, err := NormAxis(n, a, r)
		if err != nil {
			return nil, err
		}
		out[ax] = out[ax].Add(Const(pads[i] + pads[i+len(axes)]))
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferShapeOp(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		// the length is the input's rank (or part of it): unknown, and unrelated to
		// any other value's
		return []Type{TensorType(tensor.Int64, ic.Fresh())}, nil
	}
	a := n.Attrs.(*ShapeAttrs)
	r := int64(len(x.Shape))
	start, end := a.Start, a.End
	if end == AbsentInt {
		end = r
	}
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	known := []Dim{}
	if end > start {
		known = append(known, x.Shape[start:end]...)
	}
	t := TensorType(tensor.Int64, Const(int64(len(known))))
	t.Known = known
	return []Type{t}, nil
}

func inferSize(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	t := TensorType(tensor.Int64)
	if ok {
		t.Known = []Dim{product(x.Shape)}
	}
	return []Type{t}, nil
}

func inferConstantOfShape(ic *InferCtx, n *Node) ([]Type, error) {
	dt := tensor.Float32
	if v := n.Attrs.(*ConstantOfShapeAttrs).Value; v != nil {
		dt = v.DType
	}
	if shape, ok := shapeValues(n, 0); ok {
		return []Type{TensorType(dt, shape...)}, nil
	}
	if l, ok := staticLen(n, 0); ok {
		return []Type{TensorType(dt, ic.FreshShape(l)...)}, nil
	}
	return unknownRank(dt), nil
}

func inferRange(ic *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	start, ok1 := shapeValues(n, 0)
	limit, ok2 := shapeValues(n, 1)
	delta, ok3 := ConstInt64s(n, 2)
	if t.DType.IsInt() && ok1 && ok2 && ok3 && len(start) == 1 && len(limit) == 1 && len(delta) == 1 && delta[0] == 1 {
		length := limit[0].Sub(start[0])
		if v, ok := length.Value(); ok && v < 0 {
			length = Const(0)
		}
		return []Type{TensorType(t.DType, length)}, nil
	}
	if c0, c1, c2 := n.ConstInput(0), n.ConstInput(1), n.ConstInput(2); c0 != nil && c1 != nil && c2 != nil {
		s, l, d := c0.Float64s()[0], c1.Float64s()[0], c2.Float64s()[0]
		if d != 0 {
			return []Type{TensorType(t.DType, Const(int64(max(0, math.Ceil((l-s)/d)))))}, nil
		}
	}
	return []Type{TensorType(t.DType, ic.Fresh())}, nil
}

func inferFlatten(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	axis, err := FlattenAxis(n.Attrs.(*FlattenAttrs).Axis, len(x.Shape))
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	return []Type{TensorType(x.DType, product(x.Shape[:axis]), product(x.Shape[axis:]))}, nil
}

// FlattenAxis normalizes Flatten's axis, which may equal the rank.
func FlattenAxis(axis int64, rank int) (int, error) {
	if axis < 0 {
		axis += int64(rank)
	}
	if axis < 0 || axis > int64(rank) {
		return 0, fmt.Errorf("axis %d for rank %d", axis, rank)
	}
	return int(axis), nil
}

func inferSpaceDepth(toSpace bool) InferFunc {
	return func(ic *InferCtx, n *Node) ([]Type, error) {
		x, ok, err := ranked(n, 0)
		if err != nil || !ok {
			return unknownRank(x.DType), err
		}
		if len(x.Shape) != 4 {
			return nil, Inferf(n, "input rank %d, want 4", len(x.Shape))
		}
		var b int64
		if toSpace {
			b = n.Attrs.(*DepthToSpaceAttrs).BlockSize
		} else {
			b = n.Attrs.(*SpaceToDepthAttrs).BlockSize
		}
		if b <= 0 {
			return nil, Inferf(n, "blocksize %d", b)
		}
		s := x.Shape
		if toSpace {
			c, ok := s[1].Div(Const(b * b))
			if !ok {
				c = ic.Fresh()
			}
			return []Type{TensorType(x.DType, s[0], c, s[2].Scale(b), s[3].Scale(b))}, nil
		}
		h, ok1 := s[2].Div(Const(b))
		w, ok2 := s[3].Div(Const(b))
		if !ok1 {
			h = ic.Fresh()
		}
		if !ok2 {
			w = ic.Fresh()
		}
		return []Type{TensorType(x.DType, s[0], s[1].Scale(b*b), h, w)}, nil
	}
}

func inferOneHot(ic *InferCtx, n *Node) ([]Type, error) {
	idx, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	vals, err := TensorIn(n, 2)
	if err != nil {
		return nil, err
	}
	if !ok {
		return unknownRank(vals.DType), nil
	}
	depth := ic.Fresh()
	if c := n.ConstInput(1); c != nil && c.Len() == 1 {
		depth = Const(int64(c.Float64s()[0]))
	}
	r := len(idx.Shape) + 1
	axis, err := NormAxis(n, n.Attrs.(*OneHotAttrs).Axis, r)
	if err != nil {
		return nil, err
	}
	out := append(append(append([]Dim{}, idx.Shape[:axis]...), depth), idx.Shape[axis:]...)
	return []Type{TensorType(vals.DType, out...)}, nil
}

func inferNonZero(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	rank := ic.Fresh()
	if ok {
		rank = Const(int64(len(x.Shape)))
	}
	return []Type{TensorType(tensor.Int64, rank, ic.Fresh())}, nil
}

func inferCompress(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	axis := n.Attrs.(*CompressAttrs).Axis
	if axis == AbsentInt {
		return []Type{TensorType(x.DType, ic.Fresh())}, nil
	}
	ax, err := NormAxis(n, axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := append([]Dim{}, x.Shape...)
	out[ax] = ic.Fresh()
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferEyeLike(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if dt := n.Attrs.(*EyeLikeAttrs).DType; dt != 0 {
		x.DType = tensor.DType(dt)
		if !x.DType.Valid() {
			return nil, Inferf(n, "dtype %d", dt)
		}
	}
	x.Known = nil
	return []Type{x}, nil
}
