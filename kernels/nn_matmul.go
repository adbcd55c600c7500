package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Matrix products: MatMul with numpy semantics and Gemm.

func computeMatMul(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a, b := in[0].T, in[1].T
	if err := nnNumeric(n.Op, a, b); err != nil {
		return nil, err
	}
	out, err := MatMulND(a, b)
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// MatMulND is numpy's matmul: a 1-D operand is promoted to a matrix (a row for a, a
// column for b) and the promoted axis is removed from the result; the leading (batch)
// axes of both operands broadcast against each other. The result has the batch axes,
// then M (unless a is 1-D), then N (unless b is 1-D). Extents may be symbolic; a
// symbolic batch extent against a constant other than 1 is taken to agree with it.
func MatMulND(a, b *te.Tensor) (*te.Tensor, error) {
	return matMulND(a, b, contract)
}

// MatMulReduction is MatMulND with the contraction as one plain sum over k (a block
// with a reduction iterator k innermost, C[..., i, j] += A[..., i, k]·B[..., k, j]): the
// form a GEMM micro-kernel tensorizes.
func MatMulReduction(a, b *te.Tensor) (*te.Tensor, error) {
	return matMulND(a, b, func(name string, k loopir.Expr, term func(kk loopir.Expr) loopir.Expr) loopir.Expr {
		r := te.RAxis(name, k)
		return te.Sum(term(r.Var), r)
	})
}

func matMulND(a, b *te.Tensor, contract func(string, loopir.Expr, func(loopir.Expr) loopir.Expr) loopir.Expr) (*te.Tensor, error) {
	ra, rb := len(a.Shape), len(b.Shape)
	if ra == 0 || rb == 0 {
		return nil, Unsupported("MatMul of a scalar")
	}
	k := a.Shape[ra-1]
	kb := b.Shape[0]
	if rb >= 2 {
		kb = b.Shape[rb-2]
	}
	if err := sameExtent(k, kb); err != nil {
		return nil, err
	}
	batchA, batchB := a.Shape[:max(ra-2, 0)], b.Shape[:max(rb-2, 0)]
	batch, err := BroadcastShape(&te.Tensor{Shape: batchA}, &te.Tensor{Shape: batchB})
	if err != nil {
		return nil, err
	}
	nb := len(batch)
	shape := append([]loopir.Expr{}, batch...)
	if ra >= 2 {
		shape = append(shape, a.Shape[ra-2])
	}
	if rb >= 2 {
		shape = append(shape, b.Shape[rb-1])
	}
	return te.Compute("matmul", shape, func(i []loopir.Expr) loopir.Expr {
		bi, rest := i[:nb], i[nb:]
		var row, col loopir.Expr
		if ra >= 2 {
			row, rest = rest[0], rest[1:]
		}
		if rb >= 2 {
			col = rest[0]
		}
		return contract("k", k, func(kk loopir.Expr) loopir.Expr {
			ai := []loopir.Expr{kk}
			if ra >= 2 {
				ai = append(append(append([]loopir.Expr{}, bi...), row), kk)
			}
			bj := []loopir.Expr{kk}
			if rb >= 2 {
				bj = append(append(append([]loopir.Expr{}, bi...), kk), col)
			}
			return te.Mul(BroadcastAt(a, ai), BroadcastAt(b, bj))
		})
	}), nil
}

// sameExtent fails when two extents that must agree are constants that differ.
func sameExtent(x, y loopir.Expr) error {
	cx, ok1 := x.(*loopir.IntImm)
	cy, ok2 := y.(*loopir.IntImm)
	if ok1 && ok2 && cx.V != cy.V {
		return Unsupported("inner dimensions %d and %d differ", cx.V, cy.V)
	}
	return nil
}

// contract sums term(kk) for kk in [0, k). A constant k of at most unrollLimit is
// written out as an explicit sum (the block stays spatial and vectorizes); a larger
// one is a reduction over written-out chunks (the largest divisor of k up to
// chunkLimit, when it is at least 4: 11× faster than one product per iteration when
// both operands are contiguous along k, as in Gemm with transB), else a plain
// reduction.
func contract(name string, k loopir.Expr, term func(kk loopir.Expr) loopir.Expr) loopir.Expr {
	c, ok := k.(*loopir.IntImm)
	switch {
	case ok && c.V <= 0:
		return lit(0, term(i64(0)))
	case ok && c.V <= unrollLimit:
		terms := make([]loopir.Expr, c.V)
		for kk := range terms {
			terms[kk] = term(i64(int64(kk)))
		}
		return nnSum(terms)
	case ok && chunkOf(c.V, chunkLimit) >= 4:
		chunk := chunkOf(c.V, chunkLimit)
		r := te.RAxis(name, i64(c.V/chunk))
		terms := make([]loopir.Expr, chunk)
		for kk := range terms {
			terms[kk] = term(add(mul(r.Var, i64(chunk)), i64(int64(kk))))
		}
		return te.Sum(nnSum(terms), r)
	}
	r := te.RAxis(name, k)
	return te.Sum(term(r.Var), r)
}

func computeGemm(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	at := attrs[graph.GemmAttrs](n)
	a, b := in[0].T, in[1].T
	var c *te.Tensor
	if len(in) > 2 {
		c = in[2].T
	}
	if err := nnNumeric(n.Op, a, b, c); err != nil {
		return nil, err
	}
	out, err := Gemm(a, b, c, at.TransA != 0, at.TransB != 0, float64(at.Alpha), float64(at.Beta))
	if err != nil {
		return nil, err
	}
	return []*te.Tensor{out}, nil
}

// Gemm is ONNX Gemm: Y = alpha · A' · B' + beta · C, where A' and B' are the matrices
// A and B, transposed when transA / transB is set, and C (optional, nil when absent;
// ignored when beta is 0) broadcasts to [M, N]: [N], [1, N], [M, 1], [M, N] or a
// scalar. On integer types alpha and beta must be integers.
func Gemm(a, b, c *te.Tensor, transA, transB bool, alpha, beta float64) (*te.Tensor, error) {
	return gemm(a, b, c, transA, transB, alpha, beta, contract)
}

// GemmReduction is Gemm with the product A'·B' as one plain sum over k (block "gemm",
// reduction iterator k innermost), followed by a stage "gemm_out" when alpha or C
// applies: the form a tiled GPU schedule splits.
func GemmReduction(a, b, c *te.Tensor, transA, transB bool, alpha, beta float64) (*te.Tensor, error) {
	return gemm(a, b, c, transA, transB, alpha, beta, func(name string, k loopir.Expr, term func(kk loopir.Expr) loopir.Expr) loopir.Expr {
		r := te.RAxis(name, k)
		return te.Sum(term(r.Var), r)
	})
}

func gemm(a, b, c *te.Tensor, transA, transB bool, alpha, beta float64, contract func(string, loopir.Expr, func(loopir.Expr) loopir.Expr) loopir.Expr) (*te.Tensor, error) {
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, Unsupported("Gemm of rank-%d and rank-%d operands (want matrices)", len(a.Shape), len(b.Shape))
	}
	if beta == 0 {
		c = nil
	}
	if !a.DT.IsFloat() && (alpha != math.Trunc(alpha) || beta != math.Trunc(beta)) {
		return nil, Unsupported("Gemm on %v with fractional alpha %v or beta %v", a.DT, alpha, beta)
	}
	m, k := a.Shape[0], a.Shape[1]
	if transA {
		m, k = k, m
	}
	kb, nn := b.Shape[0], b.Shape[1]
	if transB {
		kb, nn = nn, kb
	}
	if err := sameExtent(k, kb); err != nil {
		return nil, err
	}
	shape := []loopir.Expr{m, nn}
	if c != nil {
		if len(c.Shape) > 2 {
			return nil, Unsupported("Gemm with a rank-%d C", len(c.Shape))
		}
		off := 2 - len(c.Shape)
		for d, e := range c.Shape {
			ce, ok1 := e.(*loopir.IntImm)
			ct, ok2 := shape[off+d].(*loopir.IntImm)
			if ok1 && ok2 && ce.V != 1 && ce.V != ct.V {
				return nil, Unsupported("Gemm: C %v does not broadcast to [%v, %v]", c.Shape, m, nn)
			}
		}
	}
	prodT := te.Compute("gemm", shape, func(i []loopir.Expr) loopir.Expr {
		return contract("k", k, func(kk loopir.Expr) loopir.Expr {
			av := a.At(i[0], kk)
			if transA {
				av = a.At(kk, i[0])
			}
			bv := b.At(kk, i[1])
			if transB {
				bv = b.At(i[1], kk)
			}
			return te.Mul(av, bv)
		})
	})
	if alpha == 1 && c == nil {
		return prodT, nil
	}
	return te.Compute("gemm_out", shape, func(i []loopir.Expr) loopir.Expr {
		v := prodT.At(i...)
		if alpha != 1 {
			v = te.Mul(lit(alpha, v), v)
		}
		if c != nil {
			cv := BroadcastAt(c, i)
			if beta != 1 {
				cv = te.Mul(lit(beta, cv), cv)
			}
			v = te.Add(v, cv)
		}
		return v
	}), nil
}
