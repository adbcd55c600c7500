package loopir

import "github.com/kilnrt/kiln/tensor"

// TensorIntrin is a declared tensor intrinsic: a small computation on tiles with a
// hand-declared implementation per code generation dialect. Desc states its meaning as
// a PrimFunc whose body is a perfect loop nest around one block; schedule.Tensorize
// replaces a loop nest that computes the same thing with an IntrinCall.
//
// Calling convention (what Tensorize passes and what Impl must accept, in order): for
// each parameter of Desc, the address of the tile's first element, then one element
// stride per loop of Desc (outermost first; zero where the loop does not index that
// parameter); then, per loop of Desc, the extent to run (at most the Desc extent when the
// loop is Partial). Impl[dialect] defines a function named Name with that signature.
type TensorIntrin struct {
	Name string
	Desc *PrimFunc
	// Unit lists {parameter, loop} pairs whose stride must be exactly 1 (vector lanes).
	Unit [][2]int
	// Strides lists {parameter, loop, stride} triples whose stride must be exactly that
	// constant (a layout the implementation assumes, as pairs side by side).
	Strides [][3]int
	// Partial marks loops whose extent may be smaller at run time than in Desc (tails).
	Partial []bool
	// Impl maps a dialect ("c") to source defining the function Name.
	Impl map[string]string
}

// Address is the address of one buffer element; it appears only as an IntrinCall argument.
type Address struct {
	Buf   *Buffer
	Index []Expr
}

func (*Address) exprNode() {}

// DType of an address is that of the element it points to.
func (a *Address) DType() tensor.DType { return a.Buf.DT }

// IntrinCall runs a tensor intrinsic; Args follow the intrinsic's calling convention.
type IntrinCall struct {
	Intrin *TensorIntrin
	Args   []Expr
}

func (*IntrinCall) stmtNode() {}

// DescNest returns the loops of a Desc-shaped body (a perfect nest, outermost first) and
// the block inside them; ok is false when the body has another shape.
func DescNest(s Stmt) (loops []*For, blk *Block, ok bool) {
	for {
		switch x := s.(type) {
		case *For:
			loops = append(loops, x)
			s = x.Body
		case *Block:
			return loops, x, true
		default:
			return nil, nil, false
		}
	}
}

// intrinArity is the argument count of the calling convention.
func intrinArity(in *TensorIntrin) int {
	loops, _, _ := DescNest(in.Desc.Body)
	return len(in.Desc.Params)*(1+len(loops)) + len(loops)
}
