package tune

import (
	"math"

	"github.com/kilnrt/kiln/loopir"
)

// Loop-IR features of a lowered kernel, each log2(1+x) of a count weighted by the trip
// counts around it (a symbolic extent counts as 64):
//
//	0 statement instances (stores and calls: the work)
//	1 loads      2 stores      3 micro-kernel calls (tensorized tiles)
//	4 outermost parallel extent      5 widest vectorized extent
//	6 loops      7 deepest nesting   8 unrolled iterations
//	9 footprint: bytes of the parameters (static extents)
//	10 arithmetic intensity: loads per store
//	11-16 the extents of the loops around the deepest store, outermost first, up to
//	      six (0 where the nest is shallower): the task's shape, which the knob values
//	      of a candidate (tile sizes, blockings) are relative to
const numLoopFeatures = 17

// nestSlots is how many loop extents around the deepest store the features keep.
const nestSlots = 6

// loopFeatures measures f.
func loopFeatures(f *loopir.PrimFunc) []float64 {
	var w struct {
		work, loads, stores, calls, par, vec, loops, depth, unrolled float64
	}
	var path, nest []float64 // extents around the current statement; around the deepest store
	var walk func(s loopir.Stmt, trips float64, depth int)
	count := func(s loopir.Stmt, trips float64) {
		loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
			switch e.(type) {
			case *loopir.Load:
				w.loads += trips
			case *loopir.Call:
				w.calls += trips
			}
			return e
		}, nil)
	}
	walk = func(s loopir.Stmt, trips float64, depth int) {
		switch x := s.(type) {
		case nil:
		case loopir.Seq:
			for _, c := range x {
				walk(c, trips, depth)
			}
		case *loopir.For:
			ext := 64.0
			if c, ok := x.Extent.(*loopir.IntImm); ok {
				ext = float64(c.V)
			}
			w.loops++
			w.depth = math.Max(w.depth, float64(depth+1))
			switch x.Kind {
			case loopir.Parallel:
				if w.par == 0 {
					w.par = ext
				}
			case loopir.Vectorized:
				w.vec = math.Max(w.vec, ext)
			case loopir.Unrolled:
				w.unrolled += trips * ext
			}
			path = append(path, ext)
			walk(x.Body, trips*ext, depth+1)
			path = path[:len(path)-1]
		case *loopir.Allocate:
			walk(x.Body, trips, depth)
		case *loopir.Block:
			walk(x.Body, trips, depth)
		case *loopir.IfThenElse:
			walk(x.Then, trips, depth)
			walk(x.Else, trips, depth)
		case *loopir.Store:
			if len(path) > len(nest) || nest == nil {
				nest = append(nest[:0:0], path...)
			}
			w.stores += trips
			w.work += trips
			count(x, trips)
		default:
			w.work += trips
			count(x, trips)
		}
	}
	walk(f.Body, 1, 0)
	foot := 0.0
	for _, p := range f.Params {
		n := 4.0
		for _, e := range p.Shape {
			if c, ok := e.(*loopir.IntImm); ok {
				n *= float64(c.V)
			} else {
				n *= 64
			}
		}
		foot += n
	}
	lg := func(x float64) float64 { return math.Log2(1 + x) }
	out := []float64{lg(w.work), lg(w.loads), lg(w.stores), lg(w.calls), lg(w.par), lg(w.vec), w.loops, w.depth, lg(w.unrolled), lg(foot), lg(w.loads / math.Max(w.stores, 1))}
	for i := 0; i < nestSlots; i++ {
		e := 0.0
		if i < len(nest) {
			e = lg(nest[i])
		}
		out = append(out, e)
	}
	return out
}
