package schedule

import (
	"github.com/kilnrt/kiln/loopir"
)

// AddUnitLoop wraps block b in a new loop of extent 1, which nothing reads, and returns
// it: a block without loops (a scalar's) gets one that bind can run on a thread axis.
func (s *Schedule) AddUnitLoop(b BlockRV) (LoopRV, error) {
	const prim = "add_unit_loop"
	name, ok := s.blocks[b]
	if !ok {
		return "", s.errf(prim, "unknown block %s", b)
	}
	if findBlock(s.f.Body, name) == nil {
		return "", s.errf(prim, "block %s no longer exists", name)
	}
	v := loopir.NewVar(name + "_unit")
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if blk, ok := x.(*loopir.Block); ok && blk.Name == name {
			return &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(1), Body: blk}
		}
		return nil
	})
	out := s.newLoop(v)
	s.trace.add(prim, []string{string(b)}, nil, nil, []string{string(out)})
	return out, nil
}
