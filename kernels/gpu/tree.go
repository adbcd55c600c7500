package gpu

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// DefaultTreeBlock is the most threads a block of the tree schedules has before the
// target's limit: enough to cover a row of 768 in three rounds, few enough that a
// modest number of rows still keeps every compute unit busy.
const DefaultTreeBlock = 256

// TreeMinRow is the shortest row the rows rule reduces with a block's threads together
// (a symbolic row length counts as long): below it one thread per row is as fast, and a
// block of threads per row would leave most of them idle.
const TreeMinRow = 64

// TreeMinReduce is the shortest reduction the reduction rule spreads over a block's
// threads: a warp's worth, one element per lane of the smallest tree.
const TreeMinReduce = 32

// ErrNotTree: a definition the block-wide rules do not take (short rows or reductions,
// many rows or outputs, a statistic that is not a sum, product, max, min or
// arg-reduction); their strategies are then not applicable, and gpu-rows or gpu-reduce
// (one thread per row or per output element) takes the node.
var ErrNotTree = errors.New("no block-wide reduction")

// TreeThreads is the block of a tree over n elements (n < 0: a symbolic extent): the
// largest power of two at most n, at most DefaultTreeBlock and the target's largest
// work-group, at least 2.
func TreeThreads(facts target.GPUFacts, n int64) int64 {
	limit := pow2Floor(min(DefaultTreeBlock, int64(facts.MaxWorkGroup)))
	if n < 0 {
		return max(limit, 2)
	}
	return max(min(pow2Floor(n), limit), 2)
}

func pow2Floor(n int64) int64 {
	p := int64(1)
	for p*2 <= n {
		p *= 2
	}
	return p
}

// scheduleTree schedules an output block and the reductions it reads (stages, in
// program order) with one GPU block per row: the output's row loops are fused and bound
// to blockIdx.x; its other loops are fused, split by threads and the thread part bound
// to threadIdx.x (each thread writes every threads-th element of the row); an output
// without such loops gets a thread loop of one iteration (the row is one element, which
// thread 0 writes). Each stage moves under the thread loop (compute_at, consumers first)
// and is then reduced by the block's threads together (schedule.AllReduce), which
// widens a one-iteration thread loop to threads.
func scheduleTree(s *schedule.Schedule, out string, stages []string, rows, inner []schedule.LoopRV, threads int64) error {
	ob, err := s.GetBlock(out)
	if err != nil {
		return err
	}
	var thread schedule.LoopRV
	bindRows := func() (schedule.LoopRV, error) {
		r := rows[0]
		if len(rows) > 1 {
			if r, err = s.Fuse(rows...); err != nil {
				return "", err
			}
		}
		return r, nil
	}
	switch {
	case len(inner) > 0:
		r, err := bindRows()
		if err != nil {
			return treeRefusal(out, err)
		}
		if err := s.Bind(r, loopir.BlockIdxX); err != nil {
			return treeRefusal(out, err)
		}
		j := inner[0]
		if len(inner) > 1 {
			if j, err = s.Fuse(inner...); err != nil {
				return treeRefusal(out, err)
			}
		}
		parts, err := s.Split(j, []int64{-1, threads})
		if err != nil {
			return treeRefusal(out, err)
		}
		if err := s.Reorder(parts[1], parts[0]); err != nil {
			return treeRefusal(out, err)
		}
		thread = parts[1]
	default:
		if len(rows) > 0 {
			r, err := bindRows()
			if err != nil {
				return treeRefusal(out, err)
			}
			if err := s.Bind(r, loopir.BlockIdxX); err != nil {
				return treeRefusal(out, err)
			}
		}
		if thread, err = s.AddUnitLoop(ob); err != nil {
			return treeRefusal(out, err)
		}
	}
	if err := s.Bind(thread, loopir.ThreadIdxX); err != nil {
		return treeRefusal(out, err)
	}
	blocks := make([]schedule.BlockRV, len(stages))
	for i := len(stages) - 1; i >= 0; i-- {
		if blocks[i], err = s.GetBlock(stages[i]); err != nil {
			return err
		}
		if err := s.ComputeAt(blocks[i], thread); err != nil {
			return treeRefusal(stages[i], err)
		}
	}
	for i, b := range blocks {
		if err := s.AllReduce(b, thread, threads); err != nil {
			return treeRefusal(stages[i], err)
		}
	}
	return nil
}

// treeRefusal turns a schedule primitive's refusal into the tree's.
func treeRefusal(stage string, err error) error {
	if errors.Is(err, schedule.ErrSchedule) {
		return fmt.Errorf("%w: stage %s: %v", ErrNotTree, stage, err)
	}
	return err
}

// inlineAll inlines every block but the last where the schedule allows it.
func inlineAll(s *schedule.Schedule) error {
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
	return nil
}

// extentOf is the product of the loops' constant extents, or -1 when one is symbolic.
func extentOf(s *schedule.Schedule, loops []schedule.LoopRV) int64 {
	n := int64(1)
	for _, l := range loops {
		e, ok := s.Extent(l)
		if !ok {
			return -1
		}
		n *= e
	}
	return n
}

// ScheduleRowsTree is the rows rule for long rows: a definition ScheduleRows takes
// (statistics over the normalized axes of each row, read back by an output stage) whose
// rows have at least TreeMinRow elements, or a symbolic number, are fewer than a block
// of one thread per row (DefaultRowBlock) for each compute unit, or a symbolic number
// (one thread per row would leave compute units idle, and its threads read rows apart
// in memory), and whose statistics are all sums, products, maxima, minima or
// arg-reductions runs one GPU block per row: a block of TreeThreads threads reduces
// each statistic together (schedule.AllReduce: a strided partial per thread, then a
// tree in shared memory) and every thread then holds it; the output stage's row is
// split among the threads, thread t writing elements t, t + threads, …. Anything else
// is ErrNotTree (or ErrNotRows).
func ScheduleRowsTree(s *schedule.Schedule, facts target.GPUFacts) error {
	if err := inlineAll(s); err != nil {
		return err
	}
	names := s.BlockNames()
	if len(names) < 2 {
		return fmt.Errorf("%w: one stage", ErrNotRows)
	}
	out, stages := names[len(names)-1], names[:len(names)-1]
	loops, rows, inner, err := rowLoops(s, out, stages)
	if err != nil {
		return err
	}
	n, r := extentOf(s, inner), extentOf(s, rows)
	switch {
	case n >= 0 && n < TreeMinRow:
		return fmt.Errorf("%w: rows of %d elements", ErrNotTree, n)
	case r >= int64(max(facts.ComputeUnits, 1))*DefaultRowBlock:
		return fmt.Errorf("%w: %d rows fill %d compute units", ErrNotTree, r, facts.ComputeUnits)
	}
	for _, name := range stages {
		st, err := classify(s, name)
		if err != nil {
			return err
		}
		if len(st.reduction) == 0 {
			return fmt.Errorf("%w: stage %s does not reduce", ErrNotTree, name)
		}
	}
	if !slices.Equal(rows, loops[:len(rows)]) {
		if err := s.Reorder(append(slices.Clone(rows), inner...)...); err != nil {
			return treeRefusal(out, err)
		}
	}
	return scheduleTree(s, out, stages, rows, inner, TreeThreads(facts, n))
}

// ScheduleReduceTree is the reduction rule for few outputs and long reductions: a
// definition ScheduleReduce takes (a reduction R, optionally followed by a stage O that
// does not reduce) with a constant number of output elements below one block's worth per
// compute unit (ComputeUnits × block: one thread per element would leave compute units
// idle) and at least TreeMinReduce elements reduced into each (or a symbolic number)
// runs one GPU block per output element: TreeThreads threads reduce it together
// (schedule.AllReduce) and thread 0 writes it (through O, or a local copy of R's result
// that cache_write adds when R is the only stage). Anything else is ErrNotTree (or
// ErrNotReduce).
func ScheduleReduceTree(s *schedule.Schedule, facts target.GPUFacts, block int64) error {
	if err := inlineAll(s); err != nil {
		return err
	}
	var stages []stage
	for _, name := range s.BlockNames() {
		st, err := classify(s, name)
		if err != nil {
			return err
		}
		stages = append(stages, st)
	}
	if len(stages) == 0 || len(stages) > 2 || len(stages[0].reduction) == 0 || len(stages) == 2 && len(stages[1].reduction) > 0 {
		return fmt.Errorf("%w: %s", ErrNotReduce, describe(stages))
	}
	red := stages[0]
	m, k := extentOf(s, red.spatial), extentOf(s, red.reduction)
	switch {
	case m < 0:
		return fmt.Errorf("%w: a symbolic number of output elements", ErrNotTree)
	case m >= int64(max(facts.ComputeUnits, 1))*block:
		return fmt.Errorf("%w: %d output elements fill %d compute units", ErrNotTree, m, facts.ComputeUnits)
	case k >= 0 && k < TreeMinReduce:
		return fmt.Errorf("%w: %d elements per output element", ErrNotTree, k)
	}
	out := ""
	if len(stages) == 2 {
		out = stages[1].name
	} else {
		c, err := s.CacheWrite(red.b, 0, loopir.ScopeLocal)
		if err != nil {
			return treeRefusal(red.name, err)
		}
		out = s.BlockName(c)
	}
	ob, err := s.GetBlock(out)
	if err != nil {
		return err
	}
	loops, err := s.GetLoops(ob)
	if err != nil {
		return err
	}
	var rows, inner []schedule.LoopRV
	if len(loops) > 0 {
		if _, rows, inner, err = rowLoops(s, out, []string{red.name}); err != nil {
			return fmt.Errorf("%w: %v", ErrNotTree, err)
		}
	}
	return scheduleTree(s, out, []string{red.name}, rows, inner, TreeThreads(facts, k))
}
