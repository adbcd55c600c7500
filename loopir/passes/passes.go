package passes

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// Pass transforms a PrimFunc: Run, or Check for a pass that refuses some kernels (an
// error it returns names the kernel and wraps the pass's sentinel).
type Pass struct {
	Name  string
	Run   func(*loopir.PrimFunc) *loopir.PrimFunc
	Check func(*loopir.PrimFunc) (*loopir.PrimFunc, error)
}

// Pipeline is an ordered list of passes.
type Pipeline []Pass

// CPUPipeline is the lowering pipeline for the C dialect.
func CPUPipeline() Pipeline {
	return Pipeline{
		{Name: "lower-blocks", Run: LowerBlocks},
		{Name: "flatten", Run: Flatten},
		{Name: "unroll", Run: UnrollLoops},
		{Name: "reuse-local-storage", Run: ReuseLocalStorage},
		{Name: "simplify", Run: Simplify},
		{Name: "partition-boundary-loops", Run: PartitionBoundaryLoops},
		{Name: "unswitch-invariant-select", Run: UnswitchInvariantSelect},
		{Name: "hoist-invariant-if", Run: HoistInvariantIf},
		{Name: "tighten-loop-guard", Run: TightenLoopGuard},
	}
}

// GPUPipeline is the lowering pipeline for the GPU dialects (CUDA C, OpenCL C): the C
// dialect's passes but tighten-loop-guard, partition-boundary-loops and
// unswitch-invariant-select, which know no target, with PrivatizeLocal after LowerBlocks (a
// local buffer becomes per-thread storage) and FlattenTextures before Flatten (texture
// accesses become texel accesses, whole lane loops of the block's iterators), then the barriers shared buffers need
// (InsertBarriers, last: no later pass moves a statement across one). The launch
// geometry is derived from the result (DeriveLaunch): it is data for the kernel table
// as well as a rewrite, so it is not a Pass.
func GPUPipeline() Pipeline {
	var cpu Pipeline
	for _, p := range CPUPipeline() {
		// the GPU kernels keep their loop guards: tightening was measured on the CPU
		// only, and a GPU thread loop's extent is its launch's; unswitching and
		// partitioning were too
		if p.Name != "tighten-loop-guard" && p.Name != "unswitch-invariant-select" && p.Name != "partition-boundary-loops" {
			cpu = append(cpu, p)
		}
	}
	gpu := append(Pipeline{cpu[0], {Name: "privatize-local", Run: PrivatizeLocal}, {Name: "flatten-textures", Check: FlattenTextures}}, cpu[1:]...)
	return append(gpu, Pass{Name: "insert-barriers", Run: InsertBarriers})
}

// Run applies every pass in order; a panicking pass becomes an error naming it.
func (p Pipeline) Run(f *loopir.PrimFunc) (out *loopir.PrimFunc, err error) {
	cur := f
	for _, pass := range p {
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("pass %s on %s: %v", pass.Name, f.Name, r)
				}
			}()
			if pass.Check != nil {
				cur, err = pass.Check(cur)
				return
			}
			cur = pass.Run(cur)
		}()
		if err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// LowerBlocks turns blocks into plain statements.
func LowerBlocks(f *loopir.PrimFunc) *loopir.PrimFunc {
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		b, ok := s.(*loopir.Block)
		if !ok {
			return nil
		}
		m := map[*loopir.Var]loopir.Expr{}
		var first loopir.Expr
		for i, it := range b.Iters {
			m[it.Var] = b.Bindings[i]
			if it.Kind == loopir.Reduction {
				c := loopir.Bin(loopir.EQ, b.Bindings[i], loopir.Int(0))
				if first == nil {
					first = c
				} else {
					first = loopir.Bin(loopir.And, first, c)
				}
			}
		}
		sub := func(st loopir.Stmt) loopir.Stmt {
			return loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
				if v, ok := e.(*loopir.Var); ok {
					if r, ok := m[v]; ok {
						return r
					}
				}
				return e
			}, nil)
		}
		var out loopir.Stmt = sub(b.Body)
		if b.Init != nil {
			init := sub(b.Init)
			if first == nil {
				out = loopir.Seq{init, out}
			} else {
				out = loopir.Seq{&loopir.IfThenElse{Cond: first, Then: init}, out}
			}
		}
		if b.Predicate != nil {
			out = &loopir.IfThenElse{Cond: loopir.Substitute(b.Predicate, m), Then: out}
		}
		return out
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// Flatten rewrites every Load/Store index to one row-major linear index.
func Flatten(f *loopir.PrimFunc) *loopir.PrimFunc {
	flat := func(b *loopir.Buffer, idx []loopir.Expr) []loopir.Expr {
		if len(idx) != len(b.Shape) && len(idx) == 1 {
			return idx // flattened already
		}
		if len(idx) != len(b.Shape) {
			panic(fmt.Sprintf("BUG: %s has rank %d, indexed with %d indices", b.Name, len(b.Shape), len(idx)))
		}
		return []loopir.Expr{loopir.FlatIndex(b, idx)}
	}
	fe := func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && needsFlat(l.Buf, l.Index) {
			return &loopir.Load{Buf: l.Buf, Index: flat(l.Buf, l.Index)}
		}
		if a, ok := e.(*loopir.Address); ok && needsFlat(a.Buf, a.Index) {
			return &loopir.Address{Buf: a.Buf, Index: flat(a.Buf, a.Index)}
		}
		return e
	}
	body := loopir.MapStmt(f.Body, fe, func(s loopir.Stmt) loopir.Stmt {
		if st, ok := s.(*loopir.Store); ok && needsFlat(st.Buf, st.Index) {
			return &loopir.Store{Buf: st.Buf, Index: flat(st.Buf, st.Index), Value: st.Value}
		}
		return nil
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// needsFlat reports a multi-dimensional (or scalar) access; rank-1 accesses are already flat.
func needsFlat(b *loopir.Buffer, idx []loopir.Expr) bool {
	return len(idx) != 1 || len(b.Shape) != 1
}
