package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// detStrategies: Det, whose elimination picks each pivot from the data (a te compute
// cannot express it), so its loop nest is built directly (Det); the trace is empty.
func detStrategies() map[graph.Op][]kernels.Strategy {
	return map[graph.Op][]kernels.Strategy{
		graph.OpDet: {{Name: "det-loops", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			f, params, err := Det(kernels.KernelName(n), n, in)
			if err != nil {
				return nil, err
			}
			return &kernels.Impl{Func: f, Trace: &schedule.Trace{}, Params: params}, nil
		}}},
	}
}

// Det builds the loop nest of Det on X [..., M, M]: per matrix, a copy in float64 and
// Gaussian elimination with partial pivoting (the row of largest magnitude in each
// column; the first one on ties), the determinant being the product of the pivots,
// negated per row swap; a zero pivot gives 0 and ends that matrix's elimination (the
// reference's algorithm). The kernel's parameters are X viewed as [B, M, M] and the
// output as [B] (B the product of the batch extents, 1 for a single matrix). Extents
// must be static; float32 and float64 only.
func Det(name string, n *graph.Node, in []kernels.Input) (*loopir.PrimFunc, []kernels.Param, error) {
	x := in[0].T
	if x.DT != tensor.Float32 && x.DT != tensor.Float64 {
		return nil, nil, kernels.Unsupported("%v on %v", n.Op, x.DT)
	}
	ext, err := kernels.Extents(x)
	if err != nil {
		return nil, nil, err
	}
	r := len(ext)
	if r < 2 || ext[r-1] != ext[r-2] {
		return nil, nil, kernels.Unsupported("%v on %v: not square matrices", n.Op, ext)
	}
	m := ext[r-1]
	batch := int64(1)
	for _, e := range ext[:r-2] {
		batch *= e
	}
	c := loopir.Int
	f64 := tensor.Float64
	xb := &loopir.Buffer{Name: "X", DT: x.DT, Shape: []loopir.Expr{c(batch), c(m), c(m)}, Scope: "global"}
	yb := &loopir.Buffer{Name: "Y", DT: x.DT, Shape: []loopir.Expr{c(batch)}, Scope: "global"}
	local := func(name string, dt tensor.DType, n int64) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: dt, Shape: []loopir.Expr{c(n)}, Scope: "local"}
	}
	a := local("det_a", f64, max(m*m, 1))
	det, tmp := local("det_acc", f64, 1), local("det_tmp", f64, 1)
	piv := local("det_piv", tensor.Int64, 1)
	at := func(i, j loopir.Expr) loopir.Expr {
		return rnnLd(a, loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, i, c(m)), j))
	}
	set := func(i, j, v loopir.Expr) loopir.Stmt {
		return rnnSt(a, v, loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, i, c(m)), j))
	}
	abs := func(v loopir.Expr) loopir.Expr { return &loopir.Call{Fn: loopir.Abs, Args: []loopir.Expr{v}} }
	zero, one := loopir.Float(0, f64), loopir.Float(1, f64)
	loopFrom := func(name string, lo, hi loopir.Expr, body func(v loopir.Expr) loopir.Stmt) loopir.Stmt {
		return rnnLoopE(name, lo, loopir.Bin(loopir.Sub, hi, lo), loopir.Serial, body)
	}
	accDet := rnnLd(det, c(0))
	column := func(col loopir.Expr) loopir.Stmt {
		p := rnnLd(piv, c(0))
		next := loopir.Bin(loopir.Add, col, c(1))
		search := loopFrom("i", next, c(m), func(i loopir.Expr) loopir.Stmt {
			return &loopir.IfThenElse{Cond: loopir.Bin(loopir.GT, abs(at(i, col)), abs(at(p, col))), Then: rnnSt(piv, i, c(0))}
		})
		swap := &loopir.IfThenElse{Cond: loopir.Bin(loopir.NE, p, col), Then: loopir.Seq{
			rnnLoop("j", 0, m, loopir.Serial, func(j loopir.Expr) loopir.Stmt {
				return loopir.Seq{rnnSt(tmp, at(p, j), c(0)), set(p, j, at(col, j)), set(col, j, rnnLd(tmp, c(0)))}
			}),
			rnnSt(det, loopir.Bin(loopir.Sub, zero, accDet), c(0)),
		}}
		eliminate := loopFrom("i", next, c(m), func(i loopir.Expr) loopir.Stmt {
			return loopir.Seq{
				rnnSt(tmp, loopir.Bin(loopir.Div, at(i, col), at(col, col)), c(0)),
				loopFrom("j", col, c(m), func(j loopir.Expr) loopir.Stmt {
					return set(i, j, loopir.Bin(loopir.Sub, at(i, j), loopir.Bin(loopir.Mul, rnnLd(tmp, c(0)), at(col, j))))
				}),
			}
		})
		pivotZero := loopir.Bin(loopir.EQ, at(p, col), zero)
		return &loopir.IfThenElse{Cond: loopir.Bin(loopir.NE, accDet, zero), Then: loopir.Seq{
			rnnSt(piv, col, c(0)),
			search,
			&loopir.IfThenElse{Cond: pivotZero, Then: rnnSt(det, zero, c(0)), Else: loopir.Seq{
				swap,
				rnnSt(det, loopir.Bin(loopir.Mul, accDet, at(col, col)), c(0)),
				eliminate,
			}},
		}}
	}
	matrix := func(b loopir.Expr) loopir.Stmt {
		load := rnnLoop("i", 0, m, loopir.Serial, func(i loopir.Expr) loopir.Stmt {
			return rnnLoop("j", 0, m, loopir.Serial, func(j loopir.Expr) loopir.Stmt {
				var v loopir.Expr = rnnLd(xb, b, i, j)
				if x.DT != f64 {
					v = &loopir.Cast{To: f64, X: v}
				}
				return set(i, j, v)
			})
		})
		var out loopir.Expr = accDet
		if x.DT != f64 {
			out = &loopir.Cast{To: x.DT, X: out}
		}
		return loopir.Seq{load, rnnSt(det, one, c(0)), rnnLoop("c", 0, m, loopir.Serial, column), rnnSt(yb, out, b)}
	}
	var body loopir.Stmt = rnnLoop("b", 0, batch, loopir.Serial, matrix)
	for _, buf := range []*loopir.Buffer{piv, tmp, det, a} {
		body = &loopir.Allocate{Buf: buf, Body: body}
	}
	f := &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{xb, yb}, Body: body}
	if err := loopir.Verify(f); err != nil {
		panic(fmt.Sprintf("BUG: Det loop nest: %v", err))
	}
	return f, []kernels.Param{{Input: 0}}, nil
}
