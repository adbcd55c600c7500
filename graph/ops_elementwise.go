package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Elementwise ops: unary maps, broadcasting binary and variadic ops, Where, Clip, Cast.

// AlphaAttrs is shared by activations with one coefficient (LeakyRelu, Elu, Celu,
// ThresholdedRelu); the default differs per op, see the rows.
type AlphaAttrs struct {
	Alpha float32 `attr:"alpha" default:"1"`
}

// LeakyReluAttrs: alpha defaults to 0.01.
type LeakyReluAttrs struct {
	Alpha float32 `attr:"alpha" default:"0.01"`
}

// SeluAttrs as in ONNX.
type SeluAttrs struct {
	Alpha float32 `attr:"alpha" default:"1.67326319217681884765625"`
	Gamma float32 `attr:"gamma" default:"1.05070102214813232421875"`
}

// HardSigmoidAttrs as in ONNX.
type HardSigmoidAttrs struct {
	Alpha float32 `attr:"alpha" default:"0.2"`
	Beta  float32 `attr:"beta" default:"0.5"`
}

// ShrinkAttrs as in ONNX.
type ShrinkAttrs struct {
	Bias  float32 `attr:"bias"`
	Lambd float32 `attr:"lambd" default:"0.5"`
}

// GeluAttrs as in ONNX (opset 20): Approximate is "none" (the erf form) or "tanh".
type GeluAttrs struct {
	Approximate string `attr:"approximate" default:"none"`
}

// IsInfAttrs as in ONNX.
type IsInfAttrs struct {
	DetectNegative int64 `attr:"detect_negative" default:"1"`
	DetectPositive int64 `attr:"detect_positive" default:"1"`
}

// CastAttrs: To is a tensor.DType number.
type CastAttrs struct {
	To       int64 `attr:"to" required:"true"`
	Saturate int64 `attr:"saturate" default:"1"`
}

// ModAttrs as in ONNX.
type ModAttrs struct {
	Fmod int64 `attr:"fmod"`
}

// BitShiftAttrs as in ONNX.
type BitShiftAttrs struct {
	Direction string `attr:"direction" required:"true"`
}

func elementwiseOps() []OpInfo {
	var rows []OpInfo
	unary := func(op Op, attrs reflect.Type) {
		rows = append(rows, OpInfo{Op: op, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: attrs, Pattern: ElemWise, Infer: SameAs(0)})
	}
	for _, op := range []Op{OpAbs, OpAcos, OpAcosh, OpAsin, OpAsinh, OpAtan, OpAtanh, OpCeil, OpCos, OpCosh,
		OpErf, OpExp, OpFloor, OpLog, OpReciprocal, OpRound, OpSigmoid, OpSign, OpSin, OpSinh,
		OpSqrt, OpTan, OpTanh, OpRelu, OpHardSwish, OpSoftplus, OpSoftsign, OpMish} {
		unary(op, nil)
	}
	unary(OpLeakyRelu, reflect.TypeFor[LeakyReluAttrs]())
	unary(OpElu, reflect.TypeFor[AlphaAttrs]())
	unary(OpCelu, reflect.TypeFor[AlphaAttrs]())
	unary(OpThresholdedRelu, reflect.TypeFor[AlphaAttrs]())
	unary(OpSelu, reflect.TypeFor[SeluAttrs]())
	unary(OpHardSigmoid, reflect.TypeFor[HardSigmoidAttrs]())
	unary(OpShrink, reflect.TypeFor[ShrinkAttrs]())
	rows = append(rows, OpInfo{Op: OpGelu, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[GeluAttrs](), Pattern: ElemWise, Infer: inferGelu})
	rows = append(rows,
		OpInfo{Op: OpNeg, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Infer: inferKnownUnary(func(d Dim) Dim { return d.Neg() })},
		OpInfo{Op: OpIdentity, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Flags: View, Infer: inferIdentity},
		OpInfo{Op: OpNot, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Infer: inferAsDType(tensor.Bool)},
		OpInfo{Op: OpIsNaN, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Infer: inferAsDType(tensor.Bool)},
		OpInfo{Op: OpIsInf, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[IsInfAttrs](), Pattern: ElemWise, Infer: inferAsDType(tensor.Bool)},
		OpInfo{Op: OpCast, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[CastAttrs](), Pattern: ElemWise, Infer: inferCast},
		OpInfo{Op: OpCastLike, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Infer: inferCastLike},
		OpInfo{Op: OpClip, MinIn: 1, MaxIn: 3, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Infer: SameAs(0)},
		OpInfo{Op: OpPRelu, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Infer: inferBroadcastAs(tensor.Undefined)},
		OpInfo{Op: OpWhere, MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Infer: inferWhere},
	)
	binary := func(op Op, flags Flags, out tensor.DType, attrs reflect.Type) {
		inf := inferBroadcastAs(tensor.Undefined)
		if out != tensor.Undefined {
			inf = inferBroadcastAs(out)
		}
		rows = append(rows, OpInfo{Op: op, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: attrs, Pattern: Broadcast, Flags: flags, Infer: inf})
	}
	binary(OpPow, 0, tensor.Undefined, nil)
	binary(OpMod, 0, tensor.Undefined, reflect.TypeFor[ModAttrs]())
	binary(OpBitShift, 0, tensor.Undefined, reflect.TypeFor[BitShiftAttrs]())
	for _, op := range []Op{OpBitwiseAnd, OpBitwiseOr, OpBitwiseXor} {
		rows = append(rows, OpInfo{Op: op, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Flags: Commutative, Infer: integersOnly(inferBroadcastAs(tensor.Undefined))})
	}
	rows = append(rows, OpInfo{Op: OpBitwiseNot, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: ElemWise, Infer: integersOnly(SameAs(0))})
	binary(OpAnd, Commutative, tensor.Bool, nil)
	binary(OpOr, Commutative, tensor.Bool, nil)
	binary(OpXor, Commutative, tensor.Bool, nil)
	binary(OpEqual, Commutative, tensor.Bool, nil)
	binary(OpGreater, 0, tensor.Bool, nil)
	binary(OpGreaterOrEqual, 0, tensor.Bool, nil)
	binary(OpLess, 0, tensor.Bool, nil)
	binary(OpLessOrEqual, 0, tensor.Bool, nil)
	arith := []struct {
		op    Op
		flags Flags
		f     func(a, b Dim) (Dim, bool)
	}{
		{OpAdd, Commutative, func(a, b Dim) (Dim, bool) { return a.Add(b), true }},
		{OpSub, 0, func(a, b Dim) (Dim, bool) { return a.Sub(b), true }},
		{OpMul, Commutative, func(a, b Dim) (Dim, bool) { return a.Mul(b), true }},
		{OpDiv, 0, func(a, b Dim) (Dim, bool) { return a.Div(b) }},
	}
	for _, a := range arith {
		rows = append(rows, OpInfo{Op: a.op, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Flags: a.flags, Infer: inferArith(a.f)})
	}
	for _, op := range []Op{OpMax, OpMin, OpMean, OpSum} {
		rows = append(rows, OpInfo{Op: op, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: 1, Pattern: Broadcast, Flags: Commutative, Infer: inferBroadcastAs(tensor.Undefined)})
	}
	return rows
}

// integersOnly wraps the inference of the bitwise ops: every input is an integer
// tensor, all of one type (a type not known yet is let through).
func integersOnly(infer InferFunc) InferFunc {
	return func(ic *InferCtx, n *Node) ([]Type, error) {
		var first tensor.DType
		for i := range n.Inputs {
			t, ok := InType(n, i)
			if !ok || t.DType == tensor.Undefined {
				continue
			}
			if !t.DType.IsInt() {
				return nil, Inferf(n, "input %d is %v; %v takes integers", i, t.DType, n.Op)
			}
			if first == tensor.Undefined {
				first = t.DType
			} else if t.DType != first {
				return nil, Inferf(n, "inputs of types %v and %v; %v takes integers of one type", first, t.DType, n.Op)
			}
		}
		return infer(ic, n)
	}
}

func inferIdentity(_ *InferCtx, n *Node) ([]Type, error) {
	t, ok := InType(n, 0)
	if !ok {
		return nil, Inferf(n, "input is missing")
	}
	return []Type{t}, nil
}

func inferAsDType(dt tensor.DType) InferFunc {
	return func(_ *InferCtx, n *Node) ([]Type, error) {
		t, err := TensorIn(n, 0)
		if err != nil {
			return nil, err
		}
		t.DType, t.Known = dt, nil
		return []Type{t}, nil
	}
}

func inferCast(_ *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	to := tensor.DType(n.Attrs.(*CastAttrs).To)
	if !to.Valid() {
		return nil, Inferf(n, "cast to unknown dtype %d", to)
	}
	if !(to.IsInt() && t.DType.IsInt()) {
		t.Known = nil
	}
	t.DType = to
	return []Type{t}, nil
}

func inferCastLike(_ *InferCtx, n *Node) ([]Type, error) {
	t, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	like, err := TensorIn(n, 1)
	if err != nil {
		return nil, err
	}
	t.DType, t.Known = like.DType, nil
	return []Type{t}, nil
}

func inferKnownUnary(f func(Dim) Dim) InferFunc {
	return func(_ *InferCtx, n *Node) ([]Type, error) {
		t, err := TensorIn(n, 0)
		if err != nil {
			return nil, err
		}
		if t.Known != nil {
			k := make([]Dim, len(t.Known))
			for i, d := range t.Known {
				k[i] = f(d)
			}
			t.Known = k
		}
		return []Type{t}, nil
	}
}

// broadcastInputs broadcasts the shapes of all present tensor inputs.
func broadcastInputs(n *Node, from int) ([]Dim, bool, error) {
	var shapes [][]Dim
	for i := from; i < len(n.Inputs); i++ {
		t, err := TensorIn(n, i)
		if err != nil {
			return nil, false, err
		}
		if t.UnknownRank {
			return nil, false, nil
		}
		shapes = append(shapes, t.Shape)
	}
	out, err := BroadcastDims(shapes...)
	if err != nil {
		return nil, false, Inferf(n, "%v", err)
	}
	return out, true, nil
}

// inferBroadcastAs gives the broadcast shape of all inputs with dtype dt (Undefined: the
// dtype of input 0).
func inferBroadcastAs(dt tensor.DType) InferFunc {
	return func(_ *InferCtx, n *Node) ([]Type, error) {
		t0, err := TensorIn(n, 0)
		if err != nil {
			return nil, err
		}
		out := dt // a local: the closure serves every node of this op
		if out == tensor.Undefined {
			out = t0.DType
		}
		shape, ranked, err := broadcastInputs(n, 0)
		if err != nil {
			return nil, err
		}
		if !ranked {
			return []Type{{Kind: KindTensor, DType: out, UnknownRank: true}}, nil
		}
		return []Type{TensorType(out, shape...)}, nil
	}
}

func inferWhere(ic *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 1)
	if err != nil {
		return nil, err
	}
	shape, ranked, err := broadcastInputs(n, 0)
	if err != nil {
		return nil, err
	}
	if !ranked {
		return []Type{{Kind: KindTensor, DType: x.DType, UnknownRank: true}}, nil
	}
	t := TensorType(x.DType, shape...)
	t.Known = whereKnown(n, t)
	return []Type{t}, nil
}

// whereKnown is the known value of an integer Where of rank 0 or 1 whose condition
// inference can decide element by element (staticBools) and whose operands' values are
// known: each element the chosen operand's (one-element operands broadcast). nil
// otherwise.
func whereKnown(n *Node, t Type) []Dim {
	if !t.DType.IsInt() || len(t.Shape) > 1 {
		return nil
	}
	cond, ok := staticBools(n.Input(0), 0)
	if !ok {
		return nil
	}
	x, okX := knownElems(n, 1)
	y, okY := knownElems(n, 2)
	if !okX || !okY {
		return nil
	}
	l := max(len(cond), len(x), len(y))
	if shape, ok := t.ConstShape(); !ok || shape.NumElements() != l {
		return nil
	}
	for _, k := range []int{len(cond), len(x), len(y)} {
		if k != l && k != 1 {
			return nil
		}
	}
	out := make([]Dim, l)
	for i := range out {
		if cond[min(i, len(cond)-1)] {
			out[i] = x[min(i, len(x)-1)]
		} else {
			out[i] = y[min(i, len(y)-1)]
		}
	}
	return out
}

// inferArith broadcasts and, for integer tensors whose values are known symbolically
// (shape arithmetic), computes the values too.
func inferArith(f func(a, b Dim) (Dim, bool)) InferFunc {
	return func(ic *InferCtx, n *Node) ([]Type, error) {
		ts, err := inferBroadcastAs(tensor.Undefined)(ic, n)
		if err != nil {
			return nil, err
		}
		a, b := n.Inputs[0].Type.Known, n.Inputs[1].Type.Known
		if a == nil || b == nil || !ts[0].DType.IsInt() || ts[0].UnknownRank || len(ts[0].Shape) > 1 {
			return ts, nil
		}
		l := max(len(a), len(b))
		if (len(a) != l && len(a) != 1) || (len(b) != l && len(b) != 1) {
			return ts, nil
		}
		known := make([]Dim, l)
		for i := range known {
			d, ok := f(a[min(i, len(a)-1)], b[min(i, len(b)-1)])
			if !ok {
				return ts, nil
			}
			known[i] = d
		}
		ts[0].Known = known
		return ts, nil
	}
}

// inferGelu is SameAs(0) once the approximation is one ONNX defines.
func inferGelu(ic *InferCtx, n *Node) ([]Type, error) {
	if a := n.Attrs.(*GeluAttrs); a.Approximate != "none" && a.Approximate != "tanh" {
		return nil, Inferf(n, "approximate=%q, want \"none\" or \"tanh\"", a.Approximate)
	}
	return SameAs(0)(ic, n)
}
