package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Shape builtins: how compiled code with symbolic dims computes extents on the host.
const (
	// BuiltinShapeDim(shape, axis) is the int64 scalar shape[axis]: a symbol's value read
	// from an input's shape (ShapeOf).
	BuiltinShapeDim = "shape.dim"
	// BuiltinShapeExpect(got, want) is got when it equals want, else an ErrInput error:
	// two inputs that share a symbol must agree on its value, and so must an extent a
	// host shape function computes with the one the graph knew.
	BuiltinShapeExpect = "shape.expect"
	// BuiltinShapeEval(program, s0, s1, ...) evaluates polynomials over the int64 scalars
	// s0, s1, ... (the symbols' values) into a tensor; see EncodeShapeProgram.
	BuiltinShapeEval = "shape.eval"
	// BuiltinShapeAtMost(got, limit) is got when it is at most limit, else an ErrInput
	// error: an extent the input shapes imply that the model cannot hold (a causal mask
	// sliced to a sequence longer than the mask).
	BuiltinShapeAtMost = "shape.at_most"
	// BuiltinShapeDerive(num, div, add) is the int64 scalar max(0, floor(num / div) +
	// add): a derived symbol (graph.SymbolDef), as a strided window's output count (0
	// where the input is smaller than the window, as ONNX has it). div below 1 is a
	// malformed executable.
	BuiltinShapeDerive = "shape.derive"
	// BuiltinShapeAgree(got, want) is got when it equals want, else an ErrGenericShape
	// error: an operand's free extent that meets another in a node (a broadcast, Concat's
	// other axes, a product's reduced extent), which the graph took to be equal and the
	// kernel reads as equal.
	BuiltinShapeAgree = "shape.agree"
)

// ErrGenericShape (wrapping ErrInput) fails a call of a generic executable whose input
// shapes it cannot serve although the model may: free extents that meet in a broadcast
// and differ (one of them 1, say). An executable built for the call's shapes serves them.
var ErrGenericShape = fmt.Errorf("%w: shapes the generic executable does not serve", ErrInput)

// maxExtent bounds every computed element: a larger value is a bad input, not an
// allocation attempt.
const maxExtent = int64(1) << 40

// ShapeTerm is one monomial of a shape program: Coef times the product of the symbol
// arguments at Syms.
type ShapeTerm struct {
	Coef int64
	Syms []int
}

// ShapePoly is one element of a shape program's result: C plus its terms.
type ShapePoly struct {
	C     int64
	Terms []ShapeTerm
}

// EncodeShapeProgram encodes the program of BuiltinShapeEval as an int64 tensor: the
// result's element type and rank, its extents, then per element the constant, the term
// count and per term the coefficient, the symbol count and the symbols' argument
// indices.
func EncodeShapeProgram(dt tensor.DType, shape []int64, elems []ShapePoly) *tensor.Tensor {
	p := []int64{int64(dt), int64(len(shape))}
	p = append(p, shape...)
	for _, e := range elems {
		p = append(p, e.C, int64(len(e.Terms)))
		for _, t := range e.Terms {
			p = append(p, t.Coef, int64(len(t.Syms)))
			for _, s := range t.Syms {
				p = append(p, int64(s))
			}
		}
	}
	return tensor.MustFromSlice(tensor.Shape{len(p)}, p)
}

// int64Scalars reads the n integer scalar arguments of a builtin that takes exactly n.
func int64Scalars(name string, args []*tensor.Tensor, n int) ([]int64, error) {
	if len(args) != n {
		return nil, fmt.Errorf("%s takes %d integer scalars, got %d arguments", name, n, len(args))
	}
	v := make([]int64, n)
	for i := range v {
		x, err := int64Scalar(name, args, i)
		if err != nil {
			return nil, err
		}
		v[i] = x
	}
	return v, nil
}

func int64Scalar(name string, args []*tensor.Tensor, i int) (int64, error) {
	if i >= len(args) || args[i] == nil || args[i].Len() != 1 || !args[i].DType.IsInt() {
		return 0, fmt.Errorf("%s: argument %d is not an integer scalar", name, i)
	}
	return args[i].Int64s()[0], nil
}

func shapeDim(args []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(args) != 2 || args[0] == nil || len(args[0].Shape) != 1 || !args[0].DType.IsInt() {
		return nil, fmt.Errorf("%s takes a 1-D integer shape and an axis", BuiltinShapeDim)
	}
	axis, err := int64Scalar(BuiltinShapeDim, args, 1)
	if err != nil {
		return nil, err
	}
	dims := args[0].Int64s()
	if axis < 0 || axis >= int64(len(dims)) {
		return nil, fmt.Errorf("%s: axis %d of a rank-%d shape", BuiltinShapeDim, axis, len(dims))
	}
	return tensor.Scalar(dims[axis]), nil
}

func shapeExpect(args []*tensor.Tensor) (*tensor.Tensor, error) {
	v, err := int64Scalars(BuiltinShapeExpect, args, 2)
	if err != nil {
		return nil, err
	}
	if got, want := v[0], v[1]; got != want {
		return nil, fmt.Errorf("%w: a symbolic dim is %d here and %d where it was bound (inputs, or a computed shape, disagree)", ErrInput, got, want)
	}
	return args[0], nil
}

func shapeAtMost(args []*tensor.Tensor) (*tensor.Tensor, error) {
	v, err := int64Scalars(BuiltinShapeAtMost, args, 2)
	if err != nil {
		return nil, err
	}
	if got, limit := v[0], v[1]; got > limit {
		return nil, fmt.Errorf("%w: the input shapes make an extent of %d where the model holds at most %d", ErrInput, got, limit)
	}
	return args[0], nil
}

func shapeAgree(args []*tensor.Tensor) (*tensor.Tensor, error) {
	v, err := int64Scalars(BuiltinShapeAgree, args, 2)
	if err != nil {
		return nil, err
	}
	if got, want := v[0], v[1]; got != want {
		return nil, fmt.Errorf("%w: an operand's extent %d meets %d (the generic executable takes free dims that meet in a node to be equal; an executable built for these shapes broadcasts or refuses them)", ErrGenericShape, got, want)
	}
	return args[0], nil
}

func shapeDerive(args []*tensor.Tensor) (*tensor.Tensor, error) {
	v, err := int64Scalars(BuiltinShapeDerive, args, 3)
	if err != nil {
		return nil, err
	}
	num, div, add := v[0], v[1], v[2]
	if div < 1 {
		return nil, fmt.Errorf("%s takes a numerator, a divisor above 0 and an addend", BuiltinShapeDerive)
	}
	q := num / div
	if num%div != 0 && num < 0 {
		q--
	}
	r, ok := tensor.SignedAdd(q, add)
	if !ok || r > maxExtent {
		return nil, fmt.Errorf("%w: a computed extent is out of range", ErrInput)
	}
	return tensor.Scalar(max(r, 0)), nil
}

// shapeEval runs a shape program (EncodeShapeProgram). A malformed program is an error,
// as is an element outside [-2^40, 2^40] (a shape no request should produce).
func shapeEval(args []*tensor.Tensor) (*tensor.Tensor, error) {
	dt, shape, out, err := runShapeProgram(BuiltinShapeEval, args, maxExtent)
	if err != nil {
		return nil, err
	}
	t := tensor.MustFromSlice(shape, out)
	if dt != tensor.Int64 {
		t = t.Cast(dt)
	}
	return t, nil
}

// runShapeProgram evaluates the program args[0] over the integer scalars args[1:] with
// checked arithmetic; an element outside [-bound, bound] is an error wrapping ErrInput.
func runShapeProgram(name string, args []*tensor.Tensor, bound int64) (tensor.DType, tensor.Shape, []int64, error) {
	fail := func(format string, a ...any) (tensor.DType, tensor.Shape, []int64, error) {
		return 0, nil, nil, fmt.Errorf(format, a...)
	}
	if len(args) == 0 || args[0] == nil || args[0].DType != tensor.Int64 || len(args[0].Shape) != 1 {
		return fail("%s: no program", name)
	}
	p := args[0].Int64s()
	syms := make([]int64, len(args)-1)
	for i := range syms {
		v, err := int64Scalar(name, args, i+1)
		if err != nil {
			return fail("%w", err)
		}
		syms[i] = v
	}
	pos := 0
	next := func() (int64, error) {
		if pos >= len(p) {
			return 0, fmt.Errorf("%s: truncated program", name)
		}
		pos++
		return p[pos-1], nil
	}
	dtv, _ := next()
	rank, err := next()
	if err != nil || rank < 0 || rank > 8 || !tensor.DType(dtv).IsInt() {
		return fail("%s: bad program header", name)
	}
	shape := make(tensor.Shape, rank)
	n := int64(1)
	for i := range shape {
		d, err := next()
		if err != nil || d < 0 || d > 1<<20 {
			return fail("%s: bad result shape", name)
		}
		if shape[i], n = int(d), n*d; n > 1<<20 { // both factors are at most 2^20
			return fail("%s: bad result shape", name)
		}
	}
	out := make([]int64, n)
	for i := range out {
		c, err := next()
		if err != nil {
			return fail("%w", err)
		}
		nt, err := next()
		if err != nil || nt < 0 {
			return fail("%s: bad term count", name)
		}
		v, ok := c, true
		for range nt {
			coef, err := next()
			if err != nil {
				return fail("%w", err)
			}
			ns, err := next()
			if err != nil || ns < 0 {
				return fail("%s: bad symbol count", name)
			}
			for range ns {
				s, err := next()
				if err != nil || s < 0 || s >= int64(len(syms)) {
					return fail("%s: symbol %d of %d", name, s, len(syms))
				}
				if coef, ok = tensor.SignedMul(coef, syms[s]); !ok {
					return fail("%w: %w: a computed extent overflows int64 (dims %v)", ErrInput, tensor.ErrTooLarge, syms)
				}
			}
			if v, ok = tensor.SignedAdd(v, coef); !ok {
				return fail("%w: %w: a computed extent overflows int64 (dims %v)", ErrInput, tensor.ErrTooLarge, syms)
			}
		}
		if v < -bound || v > bound {
			return fail("%w: a computed extent %d is out of range", ErrInput, v)
		}
		out[i] = v
	}
	if pos != len(p) {
		return fail("%s: %d trailing program words", name, len(p)-pos)
	}
	return tensor.DType(dtv), shape, out, nil
}
