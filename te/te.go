package te

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Tensor is a placeholder (input) or the result of a Compute.
type Tensor struct {
	Name  string
	DT    tensor.DType
	Shape []loopir.Expr
	buf   *loopir.Buffer
	// compute definition (nil axes/body for placeholders)
	axes []*loopir.Var
	body loopir.Expr
	arg  *argReduce // set on both tensors of an ArgMax/ArgMin pair
}

// Buffer is the loopir buffer that holds the tensor.
func (t *Tensor) Buffer() *loopir.Buffer { return t.buf }

// IsPlaceholder reports an input tensor.
func (t *Tensor) IsPlaceholder() bool { return t.body == nil }

// At reads the element at the given indices.
func (t *Tensor) At(idx ...loopir.Expr) loopir.Expr {
	if len(idx) != len(t.Shape) {
		panic(fmt.Sprintf("BUG: %s has rank %d, indexed with %d indices", t.Name, len(t.Shape), len(idx)))
	}
	return &loopir.Load{Buf: t.buf, Index: idx}
}

// Dim makes a symbolic extent variable (a runtime dim of the kernel).
func Dim(name string) *loopir.Var { return loopir.NewVar(name) }

// Placeholder declares an input.
func Placeholder(name string, dt tensor.DType, shape ...loopir.Expr) *Tensor {
	t := &Tensor{Name: name, DT: dt, Shape: shape, buf: &loopir.Buffer{Name: name, DT: dt, Shape: shape, Scope: "global"}}
	t.buf.Producer = t
	return t
}

// Compute declares a tensor whose element at indices i is f(i).
func Compute(name string, shape []loopir.Expr, f func(i []loopir.Expr) loopir.Expr) *Tensor {
	axes := make([]*loopir.Var, len(shape))
	idx := make([]loopir.Expr, len(shape))
	for k := range axes {
		axes[k] = loopir.NewVar(fmt.Sprintf("%s_i%d", name, k))
		idx[k] = axes[k]
	}
	body := f(idx)
	dt := body.DType()
	t := &Tensor{Name: name, DT: dt, Shape: shape, axes: axes, body: body,
		buf: &loopir.Buffer{Name: name, DT: dt, Shape: shape, Scope: "global"}}
	t.buf.Producer = t
	return t
}

// RAxis makes a reduction axis over [0, extent).
func RAxis(name string, extent loopir.Expr) loopir.IterVar {
	return loopir.IterVar{Var: loopir.NewVar(name), Extent: extent, Kind: loopir.Reduction}
}

func reduce(c loopir.Combiner, src loopir.Expr, axes []loopir.IterVar) loopir.Expr {
	return &loopir.Reduce{Comb: c, Source: src, Axes: axes}
}

// Sum reduces src over axes by addition.
func Sum(src loopir.Expr, axes ...loopir.IterVar) loopir.Expr {
	return reduce(loopir.SumReduce, src, axes)
}

// Max reduces src over axes by maximum.
func Max(src loopir.Expr, axes ...loopir.IterVar) loopir.Expr {
	return reduce(loopir.MaxReduce, src, axes)
}

// Min reduces src over axes by minimum.
func Min(src loopir.Expr, axes ...loopir.IterVar) loopir.Expr {
	return reduce(loopir.MinReduce, src, axes)
}

// Prod reduces src over axes by multiplication.
func Prod(src loopir.Expr, axes ...loopir.IterVar) loopir.Expr {
	return reduce(loopir.ProdReduce, src, axes)
}

// Math helpers build intrinsic calls and arithmetic.
func Exp(x loopir.Expr) loopir.Expr      { return &loopir.Call{Fn: loopir.Exp, Args: []loopir.Expr{x}} }
func Log(x loopir.Expr) loopir.Expr      { return &loopir.Call{Fn: loopir.Log, Args: []loopir.Expr{x}} }
func Tanh(x loopir.Expr) loopir.Expr     { return &loopir.Call{Fn: loopir.Tanh, Args: []loopir.Expr{x}} }
func Sqrt(x loopir.Expr) loopir.Expr     { return &loopir.Call{Fn: loopir.Sqrt, Args: []loopir.Expr{x}} }
func Erf(x loopir.Expr) loopir.Expr      { return &loopir.Call{Fn: loopir.Erf, Args: []loopir.Expr{x}} }
func Add(a, b loopir.Expr) loopir.Expr   { return loopir.Bin(loopir.Add, a, b) }
func Sub(a, b loopir.Expr) loopir.Expr   { return loopir.Bin(loopir.Sub, a, b) }
func Mul(a, b loopir.Expr) loopir.Expr   { return loopir.Bin(loopir.Mul, a, b) }
func Div(a, b loopir.Expr) loopir.Expr   { return loopir.Bin(loopir.Div, a, b) }
func MaxOf(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Max, a, b) }
func MinOf(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Min, a, b) }
func Rsqrt(x loopir.Expr) loopir.Expr    { return &loopir.Call{Fn: loopir.Rsqrt, Args: []loopir.Expr{x}} }
func Sigmoid(x loopir.Expr) loopir.Expr {
	return &loopir.Call{Fn: loopir.Sigmoid, Args: []loopir.Expr{x}}
}
func Pow(x, y loopir.Expr) loopir.Expr {
	return &loopir.Call{Fn: loopir.Pow, Args: []loopir.Expr{x, y}}
}
func Abs(x loopir.Expr) loopir.Expr   { return &loopir.Call{Fn: loopir.Abs, Args: []loopir.Expr{x}} }
func Floor(x loopir.Expr) loopir.Expr { return &loopir.Call{Fn: loopir.Floor, Args: []loopir.Expr{x}} }
func Ceil(x loopir.Expr) loopir.Expr  { return &loopir.Call{Fn: loopir.Ceil, Args: []loopir.Expr{x}} }
func Round(x loopir.Expr) loopir.Expr { return &loopir.Call{Fn: loopir.Round, Args: []loopir.Expr{x}} }

// CheckedIndex is the index v (an element read from data) along an axis of extent n,
// negative values counting from the end; one outside [-n, n) makes the kernel fail
// (loopir.IndexCheck) and reads a clamped index meanwhile.
func CheckedIndex(v, n loopir.Expr) loopir.Expr {
	if v.DType() != tensor.Int64 {
		v = Cast(tensor.Int64, v)
	}
	return &loopir.Call{Fn: loopir.IndexCheck, Args: []loopir.Expr{v, n}}
}

// Cast converts x to another element type.
func Cast(to tensor.DType, x loopir.Expr) loopir.Expr { return &loopir.Cast{To: to, X: x} }

// Select chooses t where cond holds, else f.
func Select(cond, t, f loopir.Expr) loopir.Expr { return &loopir.Select{Cond: cond, T: t, F: f} }
