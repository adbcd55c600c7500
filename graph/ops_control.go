package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Control flow (If, Loop, Scan), sequences and optionals. Their bodies are Funcs held in
// attributes; a body may read values of the enclosing Funcs. All are Opaque host-side ops.

// IfAttrs: the two branches take no parameters and return the node's outputs.
type IfAttrs struct {
	ThenBranch *Func `attr:"then_branch" required:"true"`
	ElseBranch *Func `attr:"else_branch" required:"true"`
}

// LoopAttrs: body(iter_num, cond, v...) -> (cond, v..., scan_outputs...).
type LoopAttrs struct {
	Body *Func `attr:"body" required:"true"`
}

// ScanAttrs: body(states..., scan_slices...) -> (states..., scan_output_slices...).
type ScanAttrs struct {
	Body                 *Func   `attr:"body" required:"true"`
	NumScanInputs        int64   `attr:"num_scan_inputs" required:"true"`
	ScanInputAxes        []int64 `attr:"scan_input_axes"`
	ScanInputDirections  []int64 `attr:"scan_input_directions"`
	ScanOutputAxes       []int64 `attr:"scan_output_axes"`
	ScanOutputDirections []int64 `attr:"scan_output_directions"`
}

// SequenceMapAttrs: body(elem_or_extra...) -> (elems...), applied per sequence position.
type SequenceMapAttrs struct {
	Body *Func `attr:"body" required:"true"`
}

// SequenceEmptyAttrs: dtype of the (empty) sequence's elements.
type SequenceEmptyAttrs struct {
	DType int64 `attr:"dtype" default:"1"`
}

// SplitToSequenceAttrs as in ONNX.
type SplitToSequenceAttrs struct {
	Axis     int64 `attr:"axis"`
	KeepDims int64 `attr:"keepdims" default:"1"`
}

// ConcatFromSequenceAttrs as in ONNX.
type ConcatFromSequenceAttrs struct {
	Axis    int64 `attr:"axis" required:"true"`
	NewAxis int64 `attr:"new_axis"`
}

// OptionalAttrs: the contained type, needed when the input is absent.
type OptionalAttrs struct {
	Type *Type `attr:"type"`
}

func controlOps() []OpInfo {
	host := HostOnly
	sub := HostOnly | HasSubgraphs | DataDependent
	return []OpInfo{
		{Op: OpIf, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: -1, Attrs: reflect.TypeFor[IfAttrs](), Pattern: Opaque, Flags: sub, Infer: inferIf},
		{Op: OpLoop, MinIn: 2, MaxIn: -1, MinOut: 0, MaxOut: -1, Attrs: reflect.TypeFor[LoopAttrs](), Pattern: Opaque, Flags: sub, Infer: inferLoop},
		{Op: OpScan, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: -1, Attrs: reflect.TypeFor[ScanAttrs](), Pattern: Opaque, Flags: sub, Infer: inferScan},
		{Op: OpSequenceMap, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: -1, Attrs: reflect.TypeFor[SequenceMapAttrs](), Pattern: Opaque, Flags: sub, Infer: inferSequenceMap},
		{Op: OpSequenceConstruct, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferSequenceConstruct},
		{Op: OpSequenceEmpty, MinIn: 0, MaxIn: 0, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[SequenceEmptyAttrs](), Pattern: Opaque, Flags: host, Infer: inferSequenceEmpty},
		{Op: OpSequenceAt, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host | DataDependent, Infer: inferSequenceElem},
		{Op: OpSequenceInsert, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferSequenceSame},
		{Op: OpSequenceErase, MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferSequenceSame},
		{Op: OpSequenceLength, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferScalar(tensor.Int64)},
		{Op: OpSplitToSequence, MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[SplitToSequenceAttrs](), Pattern: Opaque, Flags: host | DataDependent, Infer: inferSplitToSequence},
		{Op: OpConcatFromSequence, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ConcatFromSequenceAttrs](), Pattern: Opaque, Flags: host | DataDependent, Infer: inferConcatFromSequence},
		{Op: OpOptional, MinIn: 0, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[OptionalAttrs](), Pattern: Opaque, Flags: host, Infer: inferOptional},
		{Op: OpOptionalGetElement, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferOptionalGet},
		{Op: OpOptionalHasElement, MinIn: 0, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: Opaque, Flags: host, Infer: inferScalar(tensor.Bool)},
	}
}

// mergeTypes generalizes two types that must describe the same value (branches of an If,
// loop-carried values): equal extents stay, different ones become fresh symbols.
func mergeTypes(ic *InferCtx, a, b Type) Type {
	// an optional on one side and its content on the other (a loop-carried optional that
	// the body fills): the value is the content
	if a.Kind == KindOptional && b.Kind != KindOptional {
		return b
	}
	if b.Kind == KindOptional && a.Kind != KindOptional {
		return a
	}
	if a.Kind != b.Kind || a.DType != b.DType {
		return a
	}
	if a.Kind != KindTensor {
		if a.Elem != nil && b.Elem != nil {
			e := mergeTypes(ic, *a.Elem, *b.Elem)
			a.Elem = &e
		} else {
			a.Elem = nil
		}
		return a
	}
	if a.UnknownRank || b.UnknownRank || len(a.Shape) != len(b.Shape) {
		return Type{Kind: KindTensor, DType: a.DType, UnknownRank: true}
	}
	out := Type{Kind: KindTensor, DType: a.DType, Shape: make([]Dim, len(a.Shape))}
	for i := range a.Shape {
		if a.Shape[i].Equal(b.Shape[i]) {
			out.Shape[i] = a.Shape[i]
		} else {
			out.Shape[i] = ic.Fresh()
		}
	}
	return out
}

func inferIf(ic *InferCtx, n *Node) ([]Type, error) {
	a := n.Attrs.(*IfAttrs)
	if a.ThenBranch == nil || a.ElseBranch == nil {
		return nil, Inferf(n, "missing branch")
	}
	th, el := a.ThenBranch.Results, a.ElseBranch.Results
	if len(th) != len(el) || len(th) < len(n.Outputs) {
		return nil, Inferf(n, "branches return %d and %d values for %d outputs", len(th), len(el), len(n.Outputs))
	}
	out := make([]Type, len(n.Outputs))
	if cond, ok := staticBool(n.Input(0), 0); ok {
		// the branch taken is known: its results' types are the outputs'
		taken := th
		if !cond {
			taken = el
		}
		for i := range out {
			out[i] = taken[i].Type
			out[i].Known = nil
		}
		return out, nil
	}
	for i := range out {
		out[i] = mergeTypes(ic, th[i].Type, el[i].Type)
		out[i].Known = nil
	}
	return out, nil
}

func inferLoop(ic *InferCtx, n *Node) ([]Type, error) {
	body := n.Attrs.(*LoopAttrs).Body
	nCarried := len(n.Inputs) - 2
	if body == nil || len(body.Params) != nCarried+2 || len(body.Results) < nCarried+1 {
		return nil, Inferf(n, "body signature does not match %d loop-carried values", nCarried)
	}
	if len(n.Outputs) > len(body.Results)-1 {
		return nil, Inferf(n, "%d outputs but the body returns %d values after cond", len(n.Outputs), len(body.Results)-1)
	}
	out := make([]Type, len(n.Outputs))
	for i := range out {
		r := body.Results[1+i].Type
		r.Known = nil
		if i < nCarried {
			init := n.Inputs[2+i]
			if init == nil {
				return nil, Inferf(n, "loop-carried input %d is missing", i)
			}
			out[i] = mergeTypes(ic, init.Type, r)
			continue
		}
		if r.Kind != KindTensor {
			out[i] = r
			continue
		}
		if r.UnknownRank {
			out[i] = Type{Kind: KindTensor, DType: r.DType, UnknownRank: true}
			continue
		}
		out[i] = TensorType(r.DType, append([]Dim{ic.Fresh()}, r.Shape...)...)
	}
	return out, nil
}

func inferScan(ic *InferCtx, n *Node) ([]Type, error) {
	a := n.Attrs.(*ScanAttrs)
	m := int(a.NumScanInputs)
	nState := len(n.Inputs) - m
	if a.Body == nil || m < 0 || nState < 0 || len(a.Body.Params) != len(n.Inputs) || len(a.Body.Results) < nState {
		return nil, Inferf(n, "body signature does not match %d states and %d scan inputs", nState, m)
	}
	// the sequence length is the scan axis extent of the first scan input
	seqLen := ic.Fresh()
	if m > 0 {
		t, err := TensorIn(n, nState)
		if err != nil {
			return nil, err
		}
		axis := int64(0)
		if len(a.ScanInputAxes) > 0 {
			axis = a.ScanInputAxes[0]
		}
		if !t.UnknownRank {
			ax, err := NormAxis(n, axis, len(t.Shape))
			if err != nil {
				return nil, err
			}
			seqLen = t.Shape[ax]
		}
	}
	out := make([]Type, len(n.Outputs))
	for i := range out {
		if i >= len(a.Body.Results) {
			return nil, Inferf(n, "output %d has no body result", i)
		}
		r := a.Body.Results[i].Type
		r.Known = nil
		if i < nState {
			out[i] = mergeTypes(ic, n.Inputs[i].Type, r)
			continue
		}
		if r.UnknownRank {
			out[i] = r
			continue
		}
		k := i - nState
		axis := int64(0)
		if k < len(a.ScanOutputAxes) {
			axis = a.ScanOutputAxes[k]
		}
		ax, err := NormAxis(n, axis, len(r.Shape)+1)
		if err != nil {
			return nil, err
		}
		shape := append(append(append([]Dim{}, r.Shape[:ax]...), seqLen), r.Shape[ax:]...)
		out[i] = TensorType(r.DType, shape...)
	}
	return out, nil
}

func inferSequenceMap(_ *InferCtx, n *Node) ([]Type, error) {
	body := n.Attrs.(*SequenceMapAttrs).Body
	if body == nil || len(body.Results) < len(n.Outputs) || len(body.Params) != len(n.Inputs) {
		return nil, Inferf(n, "body signature does not match the node")
	}
	out := make([]Type, len(n.Outputs))
	for i := range out {
		e := body.Results[i].Type
		e.Known = nil
		out[i] = Type{Kind: KindSequence, Elem: &e}
	}
	return out, nil
}

func seqOf(e Type) Type {
	e.Known = nil
	return Type{Kind: KindSequence, Elem: &e}
}

func inferSequenceConstruct(ic *InferCtx, n *Node) ([]Type, error) {
	e, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(n.Inputs); i++ {
		t, err := TensorIn(n, i)
		if err != nil {
			return nil, err
		}
		if t.DType != e.DType {
			return nil, Inferf(n, "elements have dtypes %v and %v", e.DType, t.DType)
		}
		e = mergeTypes(ic, e, t)
	}
	return []Type{seqOf(e)}, nil
}

func inferSequenceEmpty(_ *InferCtx, n *Node) ([]Type, error) {
	dt := tensor.DType(n.Attrs.(*SequenceEmptyAttrs).DType)
	if !dt.Valid() {
		return nil, Inferf(n, "invalid dtype %d", dt)
	}
	return []Type{seqOf(Type{Kind: KindTensor, DType: dt, UnknownRank: true})}, nil
}

func seqIn(n *Node, i int) (Type, error) {
	t, ok := InType(n, i)
	if !ok || t.Kind != KindSequence {
		return Type{}, Inferf(n, "input %d is not a sequence", i)
	}
	return t, nil
}

func inferSequenceElem(_ *InferCtx, n *Node) ([]Type, error) {
	s, err := seqIn(n, 0)
	if err != nil {
		return nil, err
	}
	if s.Elem == nil {
		return nil, Inferf(n, "sequence element type unknown")
	}
	return []Type{*s.Elem}, nil
}

func inferSequenceSame(ic *InferCtx, n *Node) ([]Type, error) {
	s, err := seqIn(n, 0)
	if err != nil {
		return nil, err
	}
	if n.Op == OpSequenceInsert && s.Elem != nil {
		t, err := TensorIn(n, 1)
		if err != nil {
			return nil, err
		}
		if s.Elem.UnknownRank {
			return []Type{seqOf(Type{Kind: KindTensor, DType: t.DType, UnknownRank: true})}, nil
		}
		return []Type{seqOf(mergeTypes(ic, *s.Elem, t))}, nil
	}
	return []Type{s}, nil
}

func inferScalar(dt tensor.DType) InferFunc {
	return func(_ *InferCtx, _ *Node) ([]Type, error) { return []Type{TensorType(dt)}, nil }
}

func inferSplitToSequence(ic *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	a := n.Attrs.(*SplitToSequenceAttrs)
	if t.UnknownRank {
		return []Type{seqOf(t)}, nil
	}
	ax, err := NormAxis(n, a.Axis, len(t.Shape))
	if err != nil {
		return nil, err
	}
	e := Type{Kind: KindTensor, DType: t.DType, Shape: append([]Dim{}, t.Shape...)}
	if n.Input(1) == nil && a.KeepDims == 0 {
		e.Shape = append(e.Shape[:ax:ax], e.Shape[ax+1:]...)
	} else if n.Input(1) == nil {
		e.Shape[ax] = Const(1)
	} else {
		e.Shape[ax] = ic.Fresh()
	}
	return []Type{seqOf(e)}, nil
}

func inferConcatFromSequence(ic *InferCtx, n *Node) ([]Type, error) {
	s, err := seqIn(n, 0)
	if err != nil {
		return nil, err
	}
	if s.Elem == nil || s.Elem.UnknownRank {
		dt := tensor.Float32
		if s.Elem != nil {
			dt = s.Elem.DType
		}
		return []Type{{Kind: KindTensor, DType: dt, UnknownRank: true}}, nil
	}
	a := n.Attrs.(*ConcatFromSequenceAttrs)
	rank := len(s.Elem.Shape)
	if a.NewAxis != 0 {
		rank++
	}
	ax, err := NormAxis(n, a.Axis, rank)
	if err != nil {
		return nil, err
	}
	shape := append([]Dim{}, s.Elem.Shape...)
	if a.NewAxis != 0 {
		shape = append(shape[:ax], append([]Dim{ic.Fresh()}, shape[ax:]...)...)
	} else {
		shape[ax] = ic.Fresh()
	}
	return []Type{TensorType(s.Elem.DType, shape...)}, nil
}

func inferOptional(_ *InferCtx, n *Node) ([]Type, error) {
	if t, ok := InType(n, 0); ok {
		t.Known = nil
		return []Type{{Kind: KindOptional, Elem: &t}}, nil
	}
	a := n.Attrs.(*OptionalAttrs)
	if a.Type == nil {
		return nil, Inferf(n, "no input and no type attribute")
	}
	e := *a.Type
	return []Type{{Kind: KindOptional, Elem: &e}}, nil
}

func inferOptionalGet(_ *InferCtx, n *Node) ([]Type, error) {
	t, ok := InType(n, 0)
	if !ok {
		return nil, Inferf(n, "input is missing")
	}
	if t.Kind != KindOptional {
		return []Type{t}, nil // opset 18 also accepts a plain tensor or sequence
	}
	if t.Elem == nil {
		return nil, Inferf(n, "optional element type unknown")
	}
	return []Type{*t.Elem}, nil
}
