package loopir

import "github.com/kilnrt/kiln/tensor"

// Combiner is a commutative reduction.
type Combiner uint8

const (
	SumReduce Combiner = iota
	MaxReduce
	MinReduce
	ProdReduce
)

func (c Combiner) String() string { return [...]string{"sum", "max", "min", "prod"}[c] }

// Reduce is a commutative reduction of Source over Axes, starting from the combiner's
// identity. It appears only at the top of a compute definition; lowering turns it into a
// block with reduction iterators, an init statement and an update.
type Reduce struct {
	Comb   Combiner
	Source Expr
	Axes   []IterVar
}

func (*Reduce) exprNode()             {}
func (r *Reduce) DType() tensor.DType { return r.Source.DType() }

// Identity is the combiner's neutral element for dt.
func (c Combiner) Identity(dt tensor.DType) Expr {
	switch c {
	case SumReduce:
		return zeroOf(dt)
	case ProdReduce:
		return oneOf(dt)
	case MaxReduce:
		if dt.IsFloat() {
			return Float(negInf, dt)
		}
		return &IntImm{V: minInt(dt), DT: dt}
	default:
		if dt.IsFloat() {
			return Float(posInf, dt)
		}
		return &IntImm{V: maxInt(dt), DT: dt}
	}
}

// Combine applies the combiner to an accumulator and a value.
func (c Combiner) Combine(acc, v Expr) Expr {
	switch c {
	case SumReduce:
		return Bin(Add, acc, v)
	case ProdReduce:
		return Bin(Mul, acc, v)
	case MaxReduce:
		return Bin(Max, acc, v)
	default:
		return Bin(Min, acc, v)
	}
}

func zeroOf(dt tensor.DType) Expr {
	if dt.IsFloat() {
		return Float(0, dt)
	}
	return &IntImm{V: 0, DT: dt}
}

func oneOf(dt tensor.DType) Expr {
	if dt.IsFloat() {
		return Float(1, dt)
	}
	return &IntImm{V: 1, DT: dt}
}

var (
	posInf = 1.0 / zeroF
	negInf = -1.0 / zeroF
	zeroF  = 0.0
)

func minInt(dt tensor.DType) int64 {
	if dt.IsUnsigned() {
		return 0
	}
	return -1 << (8*dt.Size() - 1)
}

func maxInt(dt tensor.DType) int64 {
	if dt.IsUnsigned() && dt.Size() == 8 {
		return -1 // all bits set
	}
	if dt.IsUnsigned() {
		return 1<<(8*dt.Size()) - 1
	}
	return 1<<(8*dt.Size()-1) - 1
}
