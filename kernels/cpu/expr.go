package cpu

import "github.com/kilnrt/kiln/loopir"

// Shorthands for the index arithmetic of the blocked and packed compute definitions
// (packed.go, blocked.go); package kernels spells its definitions the same way.

func i64(v int64) loopir.Expr { return loopir.Int(v) }

func add(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Add, a, b) }
func sub(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Sub, a, b) }
func mul(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Mul, a, b) }
func div(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Div, a, b) }

// inside reports 0 <= x < n.
func inside(x, n loopir.Expr) loopir.Expr {
	return loopir.Bin(loopir.And, loopir.Bin(loopir.GE, x, i64(0)), loopir.Bin(loopir.LT, x, n))
}

// clampIndex clamps v into [0, n) (a read that a Select discards stays in bounds).
func clampIndex(v loopir.Expr, n int64) loopir.Expr {
	return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, v, i64(n-1)), i64(0))
}
