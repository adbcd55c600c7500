package gpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// DefaultRowBlock is the threads per block of the rows rule before the target's limit:
// each thread runs a whole row, so a block of two warps spreads a modest number of rows
// over more multiprocessors than the injective rule's 256 would.
const DefaultRowBlock = 64

// MaxRowLocal is the most elements of per-thread storage the rows rule gives a thread
// (its statistics, usually one element each): more would spill out of registers.
const MaxRowLocal = 64

// ErrNotRows: the definition is not several stages over shared rows, which the rows
// rule does not schedule.
var ErrNotRows = errors.New("not a row definition")

// ScheduleRows is the GPU rule for definitions of several stages that share leading
// row axes: statistics reduced over the normalized axes of each row (softmax's max and
// sum, a normalization's mean and variance) and an output stage over the whole tensor
// that reads them back per row. Every intermediate stage that can be inlined is; the
// output's loops are reordered so that its row axes (those the statistics are read at)
// come first, those are fused into one loop over the rows, split by block, and the outer
// loop is bound to blockIdx.x, the inner to threadIdx.x: one thread per row, the
// normalized axes serial inside. Each remaining stage moves under the thread loop
// (compute_at, consumers first), so a thread computes its row's statistics into its own
// local buffers and then writes its row.
//
// Refused with ErrNotRows: a single stage, an output stage that reduces or has no row
// axis (one group over the whole tensor), a stage writing a function output (several
// outputs), a stage compute_at cannot place under the thread loop (stages not sharing
// the rows), and per-thread storage that is not constant or above MaxRowLocal elements.
func ScheduleRows(s *schedule.Schedule, block int64) error {
	if block < 1 {
		return fmt.Errorf("BUG: ScheduleRows: block size %d", block)
	}
	names := s.BlockNames()
	for _, name := range names[:max(len(names)-1, 0)] {
		b, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		// a refusal (a reduction, a stage read in too many places) keeps the stage
		if err := s.ComputeInline(b); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	names = s.BlockNames()
	if len(names) < 2 {
		return fmt.Errorf("%w: one stage", ErrNotRows)
	}
	out, stages := names[len(names)-1], names[:len(names)-1]
	loops, rows, inner, err := rowLoops(s, out, stages)
	if err != nil {
		return err
	}
	if !slices.Equal(rows, loops[:len(rows)]) {
		if err := s.Reorder(append(slices.Clone(rows), inner...)...); err != nil {
			return rowsRefusal(out, err)
		}
	}
	fused := rows[0]
	if len(rows) > 1 {
		if fused, err = s.Fuse(rows...); err != nil {
			return rowsRefusal(out, err)
		}
	}
	if e, ok := s.Extent(fused); ok && e < block {
		block = max(e, 1) // one block of exactly the rows
	}
	parts, err := s.Split(fused, []int64{-1, block})
	if err != nil {
		return rowsRefusal(out, err)
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		return rowsRefusal(out, err)
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		return rowsRefusal(out, err)
	}
	for i := len(stages) - 1; i >= 0; i-- {
		b, err := s.GetBlock(stages[i])
		if err != nil {
			return err
		}
		if err := s.ComputeAt(b, parts[1]); err != nil {
			return rowsRefusal(stages[i], err)
		}
	}
	return perThread(s.Func())
}

// rowsRefusal turns a schedule primitive's refusal into the rule's.
func rowsRefusal(stage string, err error) error {
	if errors.Is(err, schedule.ErrSchedule) {
		return fmt.Errorf("%w: stage %s: %v", ErrNotRows, stage, err)
	}
	return err
}

// rowLoops returns the loops of the output block, outermost first, split into its row
// loops (those whose iterator indexes a read of another stage's buffer) and the rest,
// each in nest order.
// The output must be a perfect nest of spatial loops, one per iterator, storing into a
// function output, and the other stages must write local buffers only.
func rowLoops(s *schedule.Schedule, out string, stages []string) (loops, rows, inner []schedule.LoopRV, err error) {
	f := s.Func()
	blocks := map[string]*loopir.Block{}
	var path, nest []*loopir.Var // the loops enclosing the output block
	var rec func(st loopir.Stmt)
	rec = func(st loopir.Stmt) {
		switch x := st.(type) {
		case loopir.Seq:
			for _, c := range x {
				rec(c)
			}
		case *loopir.For:
			path = append(path, x.Var)
			rec(x.Body)
			path = path[:len(path)-1]
		case *loopir.IfThenElse:
			rec(x.Then)
			rec(x.Else)
		case *loopir.Allocate:
			rec(x.Body)
		case *loopir.Block:
			blocks[x.Name] = x
			if x.Name == out {
				nest = slices.Clone(path)
			}
		}
	}
	rec(f.Body)
	stageBufs := map[*loopir.Buffer]bool{}
	for _, name := range stages {
		loopir.MapStmt(blocks[name], func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
			if st, ok := x.(*loopir.Store); ok {
				if st.Buf.Scope != "local" {
					err = fmt.Errorf("%w: stage %s writes %s, a function output", ErrNotRows, name, st.Buf.Name)
				}
				stageBufs[st.Buf] = true
			}
			return nil
		})
	}
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := s.GetBlock(out)
	if err != nil {
		return nil, nil, nil, err
	}
	loops, err = s.GetLoops(b)
	if err != nil {
		return nil, nil, nil, err
	}
	blk := blocks[out]
	if len(loops) != len(blk.Iters) || len(nest) != len(loops) {
		return nil, nil, nil, fmt.Errorf("%w: output %s has %d loops for %d iterators", ErrNotRows, out, len(loops), len(blk.Iters))
	}
	for i, it := range blk.Iters {
		if it.Kind != loopir.Spatial {
			return nil, nil, nil, fmt.Errorf("%w: output %s reduces", ErrNotRows, out)
		}
		if blk.Bindings[i] != loopir.Expr(nest[i]) {
			return nil, nil, nil, fmt.Errorf("%w: output %s iterator %d is bound to %s, not to its loop", ErrNotRows, out, i, loopir.ExprString(blk.Bindings[i]))
		}
	}
	used := map[*loopir.Var]bool{}
	loopir.MapStmt(blk.Body, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && stageBufs[l.Buf] {
			for _, i := range l.Index {
				loopir.MapExpr(i, func(x loopir.Expr) loopir.Expr {
					if v, ok := x.(*loopir.Var); ok {
						used[v] = true
					}
					return x
				})
			}
		}
		return e
	}, nil)
	for i, l := range loops {
		if used[blk.Iters[i].Var] {
			rows = append(rows, l)
		} else {
			inner = append(inner, l)
		}
	}
	if len(rows) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: output %s reads the other stages at no axis of its own (one group)", ErrNotRows, out)
	}
	return loops, rows, inner, nil
}

// perThread checks that every allocation sits under the loop bound to threadIdx.x with
// a constant size of at most MaxRowLocal elements in all, what the launch needs of a
// thread's own storage (loopir/passes.DeriveLaunch refuses an allocation enclosing a
// bound loop).
func perThread(f *loopir.PrimFunc) error {
	var elems int64
	var err error
	var rec func(st loopir.Stmt, underThread bool)
	rec = func(st loopir.Stmt, underThread bool) {
		switch x := st.(type) {
		case loopir.Seq:
			for _, c := range x {
				rec(c, underThread)
			}
		case *loopir.For:
			rec(x.Body, underThread || x.Kind == loopir.Bound(loopir.ThreadIdxX))
		case *loopir.IfThenElse:
			rec(x.Then, underThread)
			rec(x.Else, underThread)
		case *loopir.Block:
			rec(x.Init, underThread)
			rec(x.Body, underThread)
		case *loopir.Allocate:
			n, ok := loopir.NewAnalyzer(f.Dims).Simplify(x.Buf.Elements()).(*loopir.IntImm)
			switch {
			case !underThread && err == nil:
				err = fmt.Errorf("%w: buffer %s stays shared by the threads", ErrNotRows, x.Buf.Name)
			case !ok && err == nil:
				err = fmt.Errorf("%w: buffer %s has no constant size per thread", ErrNotRows, x.Buf.Name)
			case ok:
				elems += n.V
			}
			rec(x.Body, underThread)
		}
	}
	rec(f.Body, false)
	if err == nil && elems > MaxRowLocal {
		err = fmt.Errorf("%w: %d elements of storage per thread, at most %d", ErrNotRows, elems, MaxRowLocal)
	}
	return err
}

// rowsStrategy is ScheduleRows on a node's compute definition (and its fused
// epilogues), with DefaultRowBlock threads per block capped by the target.
func rowsStrategy(reg *kernels.Registry) kernels.Strategy {
	build := func(n *graph.Node, t target.Target, lower func(rule func(*schedule.Schedule) error) (*kernels.Impl, error)) (*kernels.Impl, error) {
		block, err := BlockSize(t)
		if err != nil {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		impl, err := lower(func(s *schedule.Schedule) error { return ScheduleRows(s, min(block, DefaultRowBlock)) })
		if errors.Is(err, ErrNotRows) {
			return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
		}
		return impl, err
	}
	return kernels.Strategy{Name: "gpu-rows",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return build(n, t, func(rule func(*schedule.Schedule) error) (*kernels.Impl, error) {
				return kernels.Generic(reg, kernels.KernelName(n), n, in, rule)
			})
		},
		Fused: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
			return build(n, t, func(rule func(*schedule.Schedule) error) (*kernels.Impl, error) {
				return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, rule)
			})
		},
	}
}
