package kernels

import "github.com/kilnrt/kiln/loopir"

// The products of a recurrent kernel whose row count is symbolic (the time steps of
// the projection, the batch of the recurrent product). The tile shape of a static
// product is chosen from its row count; a symbolic one is served by two shapes picked
// at run time: blocks of rnnSymBlock rows on the kernel for that many rows (each tile
// cut into slices as wide as that kernel), and the remaining rows one at a time on the
// widest tiles, the static kernel of one row. The weights are packed in the tiles of
// one row, which both read: a slice reads its columns of a tile with the tile's width
// as row stride. A batch of 1 runs what the static kernel for 1 runs; every row count
// does the multiply-adds of its rows only, apart from a partial last vector.

// rnnSymBlock is the row count of the blocks: the most rows a static product puts in
// one tile (RNNVector.shape).
const rnnSymBlock = 6

// panelsFor is panels for a row count that may be symbolic: a symbolic one gets the
// tiles of a product of one row, which microGemmSym reads in either shape.
func (v RNNVector) panelsFor(rows loopir.Expr, k int64, segs [][2]int64) rnnPanels {
	if n, ok := rnnConst(rows); ok {
		return v.panels(n, k, segs)
	}
	return v.panels(1, k, segs)
}

// microGemmSym emits c[·, col] (=|+=) a·tile for the tile tl of w (its first column at
// col, its packed block at off) over a symbolic number of rows: the full blocks of
// rnnSymBlock rows, then the rows that remain.
func (v RNNVector) microGemmSym(zero bool, rows loopir.Expr, c, a rnnOperand, w rnnPanels, tl rnnTile,
	col, off loopir.Expr, packed *loopir.Buffer, at func(off loopir.Expr) []loopir.Expr) loopir.Stmt {
	if v.Lanes <= 0 || tl.nv <= 0 {
		panic("BUG: RNN: a micro-kernel product without a vector unit")
	}
	i := loopir.Int
	add := func(x loopir.Expr, y int64) loopir.Expr { return loopir.Bin(loopir.Add, x, i(y)) }
	call := func(mr, nv int, row, m, col, off loopir.Expr, width int64) loopir.Stmt {
		g := v.kernel(mr, nv)
		in := g.Update
		if zero {
			in = g.Init
		}
		return &loopir.IntrinCall{Intrin: in, Args: []loopir.Expr{
			c.addr(row, col), c.stride, i(1), i(0),
			a.addr(row, i(0)), a.stride, i(0), i(1),
			&loopir.Address{Buf: packed, Index: at(off)}, i(0), i(1), i(tl.width),
			m, i(width), i(w.k),
		}}
	}
	mr, nv := v.shape(rnnSymBlock)
	lanes := int64(v.Lanes)
	step := int64(nv) * lanes
	full := loopir.Bin(loopir.Div, rows, i(int64(mr)))
	blocks := rnnLoopE("it", i(0), full, loopir.Serial, func(it loopir.Expr) loopir.Stmt {
		row := loopir.Bin(loopir.Mul, it, i(int64(mr)))
		var s loopir.Seq
		for s0 := int64(0); s0 < tl.width; s0 += step {
			sw := min(step, tl.width-s0)
			s = append(s, call(mr, int((sw+lanes-1)/lanes), row, i(int64(mr)), add(col, s0), add(off, s0), sw))
		}
		return s
	})
	rest := rnnLoopE("ir", loopir.Bin(loopir.Mul, full, i(int64(mr))), loopir.Bin(loopir.Mod, rows, i(int64(mr))), loopir.Serial,
		func(row loopir.Expr) loopir.Stmt { return call(1, tl.nv, row, i(1), col, off, tl.width) })
	return loopir.Seq{blocks, rest}
}
