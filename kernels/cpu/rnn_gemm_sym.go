package cpu

import "github.com/kilnrt/kiln/loopir"

// The products of a recurrent kernel whose row count is symbolic (the time steps of
// the projection, the batch of the recurrent product). The tile shape of a static
// product is chosen from its row count (RNNVector.shape); a symbolic one takes three
// at run time: blocks of rnnSymBlock rows on the kernel for that many rows, then the
// rows that remain in pairs on the two-row kernel, then a last row on the one-row
// kernel. The weights are packed in the tiles of a one-row product (the widest); a
// kernel with fewer vectors per row reads a tile in slices, its columns of the tile
// with the tile's width as row stride. A batch of 1 or 2 runs what the static kernel
// for 1 or 2 runs, and every row count does the multiply-adds of its rows only (apart
// from a partial last vector), as the static kernels do; a remainder of 3 to 5 rows
// streams the weights once per pair instead of once. Three kernels rather than one per
// remainder keep the C small: each call site is a copy of a kernel once inlined, and
// the compile time of a generic kernel grows with them.

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
	// sliced runs rows [row, row+m) on the kernel for mr rows: a loop over the slices of
	// the tile as wide as that kernel, then a narrower last slice (each call site is a
	// copy of the kernel once the C compiler has inlined it)
	lanes := int64(v.Lanes)
	sliced := func(mr int, row, m loopir.Expr) loopir.Stmt {
		_, nv := v.shape(int64(mr))
		step := int64(nv) * lanes
		n := tl.width / step
		var s loopir.Seq
		switch {
		case n == 1:
			s = append(s, call(mr, nv, row, m, col, off, step))
		case n > 1:
			s = append(s, rnnLoop("js", 0, n, loopir.Serial, func(js loopir.Expr) loopir.Stmt {
				o := loopir.Bin(loopir.Mul, js, i(step))
				return call(mr, nv, row, m, loopir.Bin(loopir.Add, col, o), loopir.Bin(loopir.Add, off, o), step)
			}))
		}
		if w := tl.width - n*step; w > 0 {
			s = append(s, call(mr, int((w+lanes-1)/lanes), row, m, add(col, n*step), add(off, n*step), w))
		}
		return s
	}
	block := i(rnnSymBlock)
	full := loopir.Bin(loopir.Div, rows, block)
	blocks := rnnLoopE("it", i(0), full, loopir.Serial, func(it loopir.Expr) loopir.Stmt {
		return sliced(rnnSymBlock, loopir.Bin(loopir.Mul, it, block), block)
	})
	// the rows that remain: pairs, then one row
	rem, base := loopir.Bin(loopir.Mod, rows, block), loopir.Bin(loopir.Mul, full, block)
	pairs := rnnLoopE("ip", i(0), loopir.Bin(loopir.Div, rem, i(2)), loopir.Serial, func(ip loopir.Expr) loopir.Stmt {
		return sliced(2, loopir.Bin(loopir.Add, base, loopir.Bin(loopir.Mul, ip, i(2))), i(2))
	})
	last := loopir.Bin(loopir.Sub, loopir.Bin(loopir.Add, base, rem), i(1))
	single := &loopir.IfThenElse{Cond: loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, rem, i(2)), i(1)), Then: sliced(1, last, i(1))}
	return loopir.Seq{blocks, pairs, single}
}
