package cpu

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// groupInput reads input channel ci (0 ≤ ci < cg) of group g of x, stored plain
// (xblock 0) or in blocks of xblock channels, at batch n, row y and column xx. Where
// the groups and the storage blocks nest (a block holds whole groups, or a group whole
// blocks), the block and the lane are written without dividing the channel g·cg+ci, so
// that the lane is ci plus a term constant over the group's channels: a loop over ci
// then reads consecutive floats, a contiguous vector load.
func groupInput(x *te.Tensor, xblock, cg int64, n, g, ci, y, xx loopir.Expr) loopir.Expr {
	switch {
	case xblock == 0:
		return x.At(n, add(mul(g, i64(cg)), ci), y, xx)
	case xblock%cg == 0: // a block holds xblock/cg groups
		r := xblock / cg
		return x.At(n, div(g, i64(r)), y, xx, add(mul(loopir.Bin(loopir.Mod, g, i64(r)), i64(cg)), ci))
	case cg%xblock == 0: // a group spans cg/xblock blocks
		r := cg / xblock
		return x.At(n, add(mul(g, i64(r)), div(ci, i64(xblock))), y, xx, loopir.Bin(loopir.Mod, ci, i64(xblock)))
	}
	ch := add(mul(g, i64(cg)), ci)
	return x.At(n, div(ch, i64(xblock)), y, xx, loopir.Bin(loopir.Mod, ch, i64(xblock)))
}
