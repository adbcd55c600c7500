package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// KernelArg is what a kernel may touch through one argument: Elements elements of
// DType, from the start of its buffer. The VM checks every tensor it passes against it
// before the launch.
type KernelArg struct {
	DType    tensor.DType
	Elements Extent
}

// Extent is an integer expression over a kernel's runtime dims, in postfix form: a
// sequence of operations on a stack of int64 values, ending with exactly one. Each
// operation is one word (ExtAdd ... ExtMax pop two operands, push one), or two
// (ExtConst v pushes v; ExtDim i pushes the kernel's runtime dim i). Evaluation is
// checked: an overflow, a division by zero or a negative result is an error.
type Extent []int64

// Extent operations.
const (
	ExtConst int64 = iota // push the next word
	ExtDim                // push the runtime dim whose index is the next word
	ExtAdd
	ExtSub
	ExtMul
	ExtDiv // floor division
	ExtMod // floor modulo
	ExtMin
	ExtMax
	numExtOps
)

// ConstExtent is the extent of a constant.
func ConstExtent(v int64) Extent { return Extent{ExtConst, v} }

// maxExtentDepth bounds an extent program's stack.
const maxExtentDepth = 64

// check verifies that e is well formed for a kernel with ndims runtime dims and reports
// whether it reads none (a constant).
func (e Extent) check(ndims int) (constant bool, err error) {
	depth, constant := 0, true
	for i := 0; i < len(e); i++ {
		switch op := e[i]; {
		case op == ExtConst || op == ExtDim:
			if i+1 >= len(e) {
				return false, fmt.Errorf("extent %v: operation %d has no operand", e, op)
			}
			i++
			if op == ExtDim {
				if e[i] < 0 || e[i] >= int64(ndims) {
					return false, fmt.Errorf("extent %v: dim %d of %d", e, e[i], ndims)
				}
				constant = false
			}
			if depth++; depth > maxExtentDepth {
				return false, fmt.Errorf("extent %v is too deep", e)
			}
		case op > ExtDim && op < numExtOps:
			if depth < 2 {
				return false, fmt.Errorf("extent %v: operation %d lacks operands", e, op)
			}
			depth--
		default:
			return false, fmt.Errorf("extent %v: unknown operation %d", e, op)
		}
	}
	if depth != 1 {
		return false, fmt.Errorf("extent %v leaves %d values", e, depth)
	}
	return constant, nil
}

// Eval evaluates a well-formed extent on the runtime dims.
func (e Extent) Eval(dims []int64) (int64, error) {
	var stack [maxExtentDepth]int64
	sp := 0
	for i := 0; i < len(e); i++ {
		switch op := e[i]; op {
		case ExtConst, ExtDim:
			i++
			v := e[i]
			if op == ExtDim {
				if v < 0 || v >= int64(len(dims)) {
					return 0, fmt.Errorf("extent %v: dim %d of %d", e, v, len(dims))
				}
				v = dims[v]
			}
			if sp == len(stack) {
				return 0, fmt.Errorf("extent %v is too deep", e)
			}
			stack[sp] = v
			sp++
		default:
			if sp < 2 {
				return 0, fmt.Errorf("extent %v: operation %d lacks operands", e, op)
			}
			a, b := stack[sp-2], stack[sp-1]
			sp--
			ok := true
			switch op {
			case ExtAdd:
				a, ok = tensor.SignedAdd(a, b)
			case ExtSub:
				a, ok = tensor.SignedAdd(a, -b)
				ok = ok && b != -1<<63
			case ExtMul:
				a, ok = tensor.SignedMul(a, b)
			case ExtDiv, ExtMod:
				if b == 0 || (a == -1<<63 && b == -1) {
					return 0, fmt.Errorf("extent %v divides %d by %d", e, a, b)
				}
				q, r := a/b, a%b
				if r != 0 && (r < 0) != (b < 0) {
					q, r = q-1, r+b
				}
				if a = q; op == ExtMod {
					a = r
				}
			case ExtMin:
				a = min(a, b)
			case ExtMax:
				a = max(a, b)
			default:
				return 0, fmt.Errorf("extent %v: unknown operation %d", e, op)
			}
			if !ok {
				return 0, fmt.Errorf("%w: extent %v overflows int64 (dims %v)", tensor.ErrTooLarge, e, dims)
			}
			stack[sp-1] = a
		}
	}
	if sp != 1 {
		return 0, fmt.Errorf("extent %v leaves %d values", e, sp)
	}
	return stack[0], nil
}

// argBytes is a kernel argument's bytes when they do not depend on the dims (-1 when
// they do).
func (a KernelArg) constBytes() int64 {
	if c, err := a.Elements.check(0); err != nil || !c {
		return -1
	}
	n, err := a.Elements.Eval(nil)
	if err != nil || n < 0 {
		return -1
	}
	b, err := tensor.CheckedMul(n, int64(a.DType.Size()))
	if err != nil {
		return -1
	}
	return b
}

// bytes is the argument's bytes for the runtime dims.
func (a KernelArg) bytes(dims []int64) (int64, error) {
	n, err := a.Elements.Eval(dims)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("extent %v is %d for dims %v", a.Elements, n, dims)
	}
	return tensor.CheckedMul(n, int64(a.DType.Size()))
}
