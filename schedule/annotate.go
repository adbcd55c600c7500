package schedule

import (
	"maps"

	"github.com/kilnrt/kiln/loopir"
)

// Annotate attaches a key/value hint to a loop for later passes and dialects (the C
// dialect emits "c.pragma" as a #pragma line before the loop; other keys are kept and
// printed). An empty value removes the key.
func (s *Schedule) Annotate(l LoopRV, key, value string) error {
	const prim = "annotate"
	f, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	if key == "" {
		return s.errf(prim, "empty annotation key")
	}
	ann := maps.Clone(f.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	if value == "" {
		delete(ann, key)
	} else {
		ann[key] = value
	}
	if len(ann) == 0 {
		ann = nil
	}
	s.replaceLoop(f.Var, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: f.Kind, Body: f.Body, Annotations: ann}
	})
	s.trace.add(prim, []string{string(l)}, []string{key, value}, nil, nil)
	return nil
}

// StorageAlign pads the write-th output buffer of block b so that the stride of axis is
// offset modulo factor (TVM's storage_align: rows that do not map to the same cache
// sets or banks). The buffer must be allocated in the function with constant extents;
// the strides of the axes outside axis grow to match.
func (s *Schedule) StorageAlign(b BlockRV, write, axis int, factor, offset int64) error {
	const prim = "storage_align"
	name, ok := s.blocks[b]
	if !ok {
		return s.errf(prim, "unknown block %s", b)
	}
	blk := findBlock(s.f.Body, name)
	if write < 0 || write >= len(blk.Writes) {
		return s.errf(prim, "block %s has %d write regions, not %d", name, len(blk.Writes), write+1)
	}
	buf := blk.Writes[write].Buf
	if isParam(s.f, buf) {
		return s.errf(prim, "%s is a parameter; its layout belongs to the caller", buf.Name)
	}
	if axis < 0 || axis >= len(buf.Shape)-1 {
		return s.errf(prim, "axis %d of %s: only axes with an inner axis have a stride to pad", axis, buf.Name)
	}
	if factor <= 0 || offset < 0 || offset >= factor {
		return s.errf(prim, "want factor > 0 and 0 <= offset < factor, got %d, %d", factor, offset)
	}
	ext := make([]int64, len(buf.Shape))
	strides := make([]int64, len(buf.Shape))
	for d, e := range buf.Shape {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			return s.errf(prim, "%s has a symbolic extent", buf.Name)
		}
		ext[d] = c.V
	}
	if buf.Strides != nil {
		for d, e := range buf.Strides {
			strides[d] = e.(*loopir.IntImm).V
		}
	} else {
		strides[len(ext)-1] = 1
		for d := len(ext) - 2; d >= 0; d-- {
			strides[d] = strides[d+1] * ext[d+1]
		}
	}
	for d := len(ext) - 2; d >= 0; d-- {
		if need := strides[d+1] * ext[d+1]; strides[d] < need {
			strides[d] = need
		}
		if d == axis {
			for strides[d]%factor != offset {
				strides[d]++
			}
		}
	}
	exprs := make([]loopir.Expr, len(strides))
	for d, v := range strides {
		exprs[d] = loopir.Int(v)
	}
	aligned := *buf
	aligned.Strides = exprs
	s.replaceBuffer(buf, &aligned)
	s.trace.add(prim, []string{string(b)}, nil, []int64{int64(write), int64(axis), factor, offset}, nil)
	return nil
}

// replaceBuffer substitutes nb for every use of old (the function's buffers are shared
// with the function the schedule started from, which must not change).
func (s *Schedule) replaceBuffer(old, nb *loopir.Buffer) {
	swap := func(b *loopir.Buffer) *loopir.Buffer {
		if b == old {
			return nb
		}
		return b
	}
	regions := func(rs []loopir.Region) []loopir.Region {
		out := make([]loopir.Region, len(rs))
		for i, r := range rs {
			out[i] = loopir.Region{Buf: swap(r.Buf), Ranges: r.Ranges}
		}
		return out
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr {
		switch x := e.(type) {
		case *loopir.Load:
			return &loopir.Load{Buf: swap(x.Buf), Index: x.Index}
		case *loopir.Address:
			return &loopir.Address{Buf: swap(x.Buf), Index: x.Index}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Store:
			return &loopir.Store{Buf: swap(x.Buf), Index: x.Index, Value: x.Value}
		case *loopir.Allocate:
			return &loopir.Allocate{Buf: swap(x.Buf), Body: x.Body}
		case *loopir.Block:
			nb := *x
			nb.Reads, nb.Writes = regions(x.Reads), regions(x.Writes)
			return &nb
		}
		return nil
	})
}
