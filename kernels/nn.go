package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The generic definitions of the neural-network ops: convolution (nn_conv.go),
// transposed convolution (nn_convtranspose.go) and matrix products (nn_matmul.go).
// They are the portable fallback of every target and the definitions that tensorized
// strategies are checked against. Four habits keep them friendly to the generic
// schedule rule:
//
//   - a small reduction (at most unrollLimit terms: depthwise 3×3 windows, short inner
//     dimensions) is written out as an explicit sum, so the block is spatial and the
//     rule vectorizes its innermost output loop instead of running a scalar reduction;
//   - a larger one is a reduction loop around a written-out chunk of at most chunkLimit
//     terms (channels, trailing window taps, a slice of k): the accumulator is updated
//     once per chunk, and the rule, which moves the innermost spatial loop inside the
//     reductions when the inputs stream along it, vectorizes that loop;
//   - padding guards are emitted only on the axes (and, when unrolled, for the taps)
//     whose index can actually leave the input; every other read is plain and affine;
//   - epilogues (bias, alpha/beta) are separate elementwise stages after the product.

// unrollLimit is the largest reduction (number of multiply-adds per output element)
// written out as an explicit sum instead of a reduction loop.
const unrollLimit = 16

// chunkLimit is the largest number of multiply-adds written out in the body of a
// reduction loop (a chunk of channels or of a matrix product's inner dimension, or the
// trailing taps of a window): enough to keep the accumulator in a register for several
// products, few enough that the generic rule's vectorized spatial loop inside the
// reduction keeps its operands in registers.
const chunkLimit = 8

// nnComputes: convolution, matrix products.
func nnComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpMatMul:        computeMatMul,
		graph.OpGemm:          computeGemm,
		graph.OpConv:          computeConv,
		graph.OpConvTranspose: computeConvTranspose,
	}
}

// nnNumeric accepts the element types the products are defined on here: float32,
// float64 and the integer types (no half-precision arithmetic in the code generators).
func nnNumeric(op graph.Op, ts ...*te.Tensor) error {
	for _, t := range ts {
		if t == nil {
			continue
		}
		switch {
		case t.DT == tensor.Float16 || t.DT == tensor.BFloat16:
			return Unsupported("%v on %v (no half-precision arithmetic)", op, t.DT)
		case !t.DT.IsNumeric():
			return Unsupported("%v on %v", op, t.DT)
		case t.DT != ts[0].DT:
			return Unsupported("%v on mixed element types %v and %v", op, ts[0].DT, t.DT)
		}
	}
	return nil
}

// nnFloat accepts float32 and float64 only.
func nnFloat(op graph.Op, ts ...*te.Tensor) error {
	if err := nnNumeric(op, ts...); err != nil {
		return err
	}
	if !ts[0].DT.IsFloat() {
		return Unsupported("%v on %v", op, ts[0].DT)
	}
	return nil
}

// nnClamp keeps an index in [0, n).
func nnClamp(x loopir.Expr, n int64) loopir.Expr {
	return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, x, i64(n-1)), i64(0))
}

// nnAnd joins conditions; nil stands for true.
func nnAnd(a, b loopir.Expr) loopir.Expr {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return loopir.Bin(loopir.And, a, b)
}

// nnSum adds terms left to right (the order of a sequential reduction).
func nnSum(terms []loopir.Expr) loopir.Expr {
	acc := terms[0]
	for _, t := range terms[1:] {
		acc = te.Add(acc, t)
	}
	return acc
}

// nnProd is the product of extents.
func nnProd(v []int64) int64 {
	p := int64(1)
	for _, x := range v {
		p *= x
	}
	return p
}

// nnUnravel turns a linear index into a multi-index over ext (row-major).
func nnUnravel(p int64, ext []int64) []int64 {
	out := make([]int64, len(ext))
	for d := len(ext) - 1; d >= 0; d-- {
		out[d] = p % ext[d]
		p /= ext[d]
	}
	return out
}
