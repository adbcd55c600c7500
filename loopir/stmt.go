package loopir

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Buffer is a multi-dimensional array: a function parameter or a local allocation.
type Buffer struct {
	Name  string
	DT    tensor.DType
	Shape []Expr
	Scope string // "global" (parameters), "local" (per-thread), "shared" (GPU), "texture"
	// Packing maps a texture buffer's (ScopeTexture) indices to texels; ignored in
	// other scopes.
	Packing Packing
	// Strides, when set, are the element strides of each axis (storage_align pads them);
	// nil means row-major over Shape.
	Strides []Expr
	// Producer is an opaque back-reference set by the front end that created the buffer
	// (te records its Tensor); loopir never looks at it.
	Producer any
}

// Stmt is a statement node.
type Stmt interface{ stmtNode() }

// ForKind says how a loop runs.
type ForKind uint8

const (
	Serial ForKind = iota
	Parallel
	Vectorized
	Unrolled
	// boundFirst is the first of the kinds of loops bound to a GPU thread axis, one
	// per ThreadAxis in order (Bound, ForKind.Thread).
	boundFirst
)

var forKindNames = [...]string{"serial", "parallel", "vectorized", "unrolled"}

// String is the kind's name; a bound loop's is "bind(threadIdx.x)".
func (k ForKind) String() string {
	if a, ok := k.Thread(); ok {
		return "bind(" + a.String() + ")"
	}
	if k < boundFirst {
		return forKindNames[k]
	}
	return fmt.Sprintf("for-kind(%d)", uint8(k))
}

// For iterates Var over [Min, Min+Extent).
type For struct {
	Var         *Var
	Min, Extent Expr
	Kind        ForKind
	Body        Stmt
	// Annotations are hints for passes and dialects (schedule.Annotate); the C dialect
	// reads "c.pragma" (emitted as #pragma before the loop) and ignores the rest.
	Annotations map[string]string
}

// IterKind distinguishes a block's spatial and reduction iterators.
type IterKind uint8

const (
	Spatial IterKind = iota
	Reduction
)

// IterVar is a block iterator with its domain [0, Extent).
type IterVar struct {
	Var    *Var
	Extent Expr
	Kind   IterKind
}

// Region is the part of a buffer a block reads or writes: one [Min, Min+Extent) per axis.
type Region struct {
	Buf    *Buffer
	Ranges [][2]Expr // {min, extent}
}

// Block is one computation: its iterators are bound to expressions of the enclosing loop
// variables (Bindings, one per iterator). Init, when present, runs when every reduction
// iterator is at its first value; Body runs for every binding. Predicate, when non-nil,
// must hold for the block to run at all (splits that do not divide an extent add one, so
// loop nests stay perfect).
type Block struct {
	Name      string
	Iters     []IterVar
	Bindings  []Expr
	Predicate Expr
	Reads     []Region
	Writes    []Region
	Init      Stmt
	Body      Stmt
}

// Store writes Value at a multi-dimensional index.
type Store struct {
	Buf   *Buffer
	Index []Expr
	Value Expr
}

// Seq runs statements in order.
type Seq []Stmt

// IfThenElse runs Then when Cond holds, else Else (which may be nil).
type IfThenElse struct {
	Cond       Expr
	Then, Else Stmt
}

// Allocate introduces a local buffer for the duration of Body.
type Allocate struct {
	Buf  *Buffer
	Body Stmt
}

func (*For) stmtNode()        {}
func (*Block) stmtNode()      {}
func (*Store) stmtNode()      {}
func (Seq) stmtNode()         {}
func (*IfThenElse) stmtNode() {}
func (*Allocate) stmtNode()   {}

// PrimFunc is one kernel: buffer parameters (inputs, then outputs), symbolic dims whose
// values arrive at run time in this order, and a body.
type PrimFunc struct {
	Name   string
	Params []*Buffer
	Dims   []*Var
	Body   Stmt
	// NoContract: every floating-point multiply rounds before the add that uses it,
	// as the graph's separate Mul and Add nodes do; the printed code forbids the C or
	// GPU compiler to fuse them into one fused multiply-add. Set on kernels whose
	// result is rounded to integers (a quantizer's input), where one ulp moves a value
	// across a rounding boundary and changes it by a whole quantization step.
	NoContract bool
}

// FlatIndex is the element offset of a multi-dimensional index: by the buffer's strides
// when it has them, row-major otherwise.
func FlatIndex(b *Buffer, idx []Expr) Expr {
	var lin Expr = Int(0)
	if b.Strides != nil {
		for k, i := range idx {
			lin = Bin(Add, lin, Bin(Mul, i, b.Strides[k]))
		}
		return lin
	}
	for k, i := range idx {
		lin = Bin(Add, Bin(Mul, lin, b.Shape[k]), i)
	}
	return lin
}

// Elements is the number of elements the buffer's storage holds.
func (b *Buffer) Elements() Expr {
	if b.Strides != nil && len(b.Shape) > 0 {
		return Bin(Mul, b.Shape[0], b.Strides[0])
	}
	var n Expr = Int(1)
	for _, d := range b.Shape {
		n = Bin(Mul, n, d)
	}
	return n
}
