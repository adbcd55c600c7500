package loopir

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Expr is an immutable expression node.
type Expr interface {
	DType() tensor.DType
	exprNode()
}

// Var is a named scalar variable; identity is the pointer.
type Var struct {
	Name string
	DT   tensor.DType
}

// IntImm is an integer constant.
type IntImm struct {
	V  int64
	DT tensor.DType
}

// FloatImm is a floating-point constant.
type FloatImm struct {
	V  float64
	DT tensor.DType
}

// BinOp enumerates binary operators. Div on integers is floor division, Mod is floor
// modulo (the forms index arithmetic needs); on floats Div is ordinary division. Shl and
// Shr shift the bits of an integer (Shr is logical: it shifts the unsigned
// representation); a shift count outside [0, bit width) gives 0. Min and Max
// are a compare and a select (a < b ? a : b): on floats the second operand when one is
// NaN, as min/max instructions answer. BitAnd, BitOr and BitXor combine the bits of two
// integers of one type (the complement of x is x BitXor all ones); And and Or are
// logical (operands and result are truth values).
type BinOp uint8

const (
	Add BinOp = iota
	Sub
	Mul
	Div
	Mod
	Min
	Max
	Shl
	Shr
	BitAnd
	BitOr
	BitXor
	EQ
	NE
	LT
	LE
	GT
	GE
	And
	Or
)

var binOpNames = [...]string{"+", "-", "*", "/", "%", "min", "max", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||"}

func (o BinOp) String() string { return binOpNames[o] }

// IsCompare reports comparison and logical operators (result bool).
func (o BinOp) IsCompare() bool { return o >= EQ }

// Binary applies a binary operator.
type Binary struct {
	Op   BinOp
	A, B Expr
}

// Not negates a boolean.
type Not struct{ X Expr }

// Select chooses T where Cond holds, else F (both evaluated).
type Select struct{ Cond, T, F Expr }

// Cast converts to another element type.
type Cast struct {
	To tensor.DType
	X  Expr
}

// Intrinsic names a math function, or IndexCheck.
type Intrinsic uint8

const (
	Exp Intrinsic = iota
	Log
	Sqrt
	Rsqrt
	Tanh
	Sigmoid
	Erf
	Pow
	Abs
	Floor
	Ceil
	Round
	Sin
	Cos
	Asin
	Acos
	Atan
	Asinh
	Acosh
	Atanh
	// Fmod(a, b) is the float remainder of a / b truncated toward zero (C's fmod: the
	// sign of a; NaN when b is 0 or a infinite).
	Fmod
	// IndexCheck(v, n) is an index read from data for an axis of extent n, with ONNX's
	// meaning: v in [-n, n) selects v mod n. Outside that range the kernel reports an
	// error once it has finished (the dialect's way: a status code) and the expression is
	// a clamped index, so the read it feeds stays in bounds. Both operands are int64.
	IndexCheck
)

var intrinsicNames = [...]string{"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "pow", "abs", "floor", "ceil", "round", "sin", "cos",
	"asin", "acos", "atan", "asinh", "acosh", "atanh", "fmod", "index_check"}

func (i Intrinsic) String() string { return intrinsicNames[i] }

// Call applies an intrinsic; the result has the first argument's type.
type Call struct {
	Fn   Intrinsic
	Args []Expr
}

// Load reads a buffer element at a multi-dimensional index (flattened by a pass).
type Load struct {
	Buf   *Buffer
	Index []Expr
}

func (*Var) exprNode()      {}
func (*IntImm) exprNode()   {}
func (*FloatImm) exprNode() {}
func (*Binary) exprNode()   {}
func (*Not) exprNode()      {}
func (*Select) exprNode()   {}
func (*Cast) exprNode()     {}
func (*Call) exprNode()     {}
func (*Load) exprNode()     {}

func (v *Var) DType() tensor.DType      { return v.DT }
func (c *IntImm) DType() tensor.DType   { return c.DT }
func (c *FloatImm) DType() tensor.DType { return c.DT }
func (b *Binary) DType() tensor.DType {
	if b.Op.IsCompare() {
		return tensor.Bool
	}
	return b.A.DType()
}
func (*Not) DType() tensor.DType      { return tensor.Bool }
func (s *Select) DType() tensor.DType { return s.T.DType() }
func (c *Cast) DType() tensor.DType   { return c.To }
func (c *Call) DType() tensor.DType   { return c.Args[0].DType() }
func (l *Load) DType() tensor.DType   { return l.Buf.DT }
func (v *Var) String() string         { return v.Name }
func (c *IntImm) String() string      { return fmt.Sprint(c.V) }
func (c *FloatImm) String() string    { return fmt.Sprint(c.V) }

// Int makes an int64 immediate (index arithmetic is int64).
func Int(v int64) *IntImm { return &IntImm{V: v, DT: tensor.Int64} }

// Float makes a float immediate of the given type.
func Float(v float64, dt tensor.DType) *FloatImm { return &FloatImm{V: v, DT: dt} }

// NewVar makes an int64 index variable.
func NewVar(name string) *Var { return &Var{Name: name, DT: tensor.Int64} }

// Bin builds a binary expression, folding integer constants and the identities
// x+0, 0+x, x-0, x*1, 1*x, x*0, 0*x on integer immediates.
func Bin(op BinOp, a, b Expr) Expr {
	if v, ok := intValue(b); ok && ((v == 0 && (op == Add || op == Sub)) || (v == 1 && (op == Mul || op == Div))) {
		return a
	}
	if v, ok := intValue(a); ok && ((v == 0 && op == Add) || (v == 1 && op == Mul)) {
		return b
	}
	if op == Mul {
		if v, ok := intValue(a); ok && v == 0 {
			return a
		}
		if v, ok := intValue(b); ok && v == 0 {
			return b
		}
	}
	if x, ok := a.(*IntImm); ok {
		if y, ok := b.(*IntImm); ok && !op.IsCompare() {
			if v, ok := foldInt(op, x.V, y.V); ok {
				return &IntImm{V: v, DT: x.DT}
			}
		}
	}
	return &Binary{Op: op, A: a, B: b}
}

func foldInt(op BinOp, a, b int64) (int64, bool) {
	switch op { // an overflow is not folded: the expression stays as it is
	case Add:
		return tensor.SignedAdd(a, b)
	case Sub:
		if b == math.MinInt64 {
			return 0, false
		}
		return tensor.SignedAdd(a, -b)
	case Mul:
		return tensor.SignedMul(a, b)
	case Div:
		if b == 0 || (a == math.MinInt64 && b == -1) {
			return 0, false
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, true
	case Mod:
		if b == 0 {
			return 0, false
		}
		r := a % b
		if r != 0 && ((r < 0) != (b < 0)) {
			r += b
		}
		return r, true
	case Min:
		return min(a, b), true
	case Max:
		return max(a, b), true
	case BitAnd: // operands in one type's range (uint64 as its bits) give a result in it
		return a & b, true
	case BitOr:
		return a | b, true
	case BitXor:
		return a ^ b, true
	}
	return 0, false
}

func intValue(e Expr) (int64, bool) {
	if c, ok := e.(*IntImm); ok {
		return c.V, true
	}
	return 0, false
}
