package passes

import (
	"github.com/kilnrt/kiln/loopir"
)

// ReuseLocalStorage lets local buffers whose lifetimes do not overlap share one
// allocation. It looks at the allocations wrapping the function body (where te puts
// intermediates) and the top-level statements below them: a buffer is live from the
// first statement that touches it to the last. Buffers are taken in order of first use;
// each joins the first storage of the same element type and scope whose last user ends
// before the buffer's first, and that storage grows to the larger size. Runs after
// Flatten (accesses are one flat index, so a buffer can be renamed to its storage).
// Buffers with symbolic sizes keep their own allocation.
func ReuseLocalStorage(f *loopir.PrimFunc) *loopir.PrimFunc {
	var allocs []*loopir.Buffer
	body := f.Body
	for {
		a, ok := body.(*loopir.Allocate)
		if !ok {
			break
		}
		allocs = append(allocs, a.Buf)
		body = a.Body
	}
	seq, ok := body.(loopir.Seq)
	if !ok || len(allocs) < 2 {
		return f
	}
	first, last := map[*loopir.Buffer]int{}, map[*loopir.Buffer]int{}
	for i, st := range seq {
		for b := range touched(st) {
			if _, ok := first[b]; !ok {
				first[b] = i
			}
			last[b] = i
		}
	}
	type storage struct {
		buf   *loopir.Buffer // the allocation that survives
		elems int64
		end   int
	}
	var slots []*storage
	rename := map[*loopir.Buffer]*loopir.Buffer{}
	owner := map[*loopir.Buffer]*storage{}
	order := append([]*loopir.Buffer{}, allocs...)
	// by first use (unused buffers last, in allocation order)
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && firstUse(first, order[j]) < firstUse(first, order[j-1]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for _, b := range order {
		n, ok := constElems(b)
		if _, used := first[b]; !ok || !used {
			continue
		}
		var slot *storage
		for _, s := range slots {
			if s.buf.DT == b.DT && s.buf.Scope == b.Scope && s.end < first[b] {
				slot = s
				break
			}
		}
		if slot == nil {
			slot = &storage{buf: b}
			slots = append(slots, slot)
		} else {
			rename[b] = slot.buf
		}
		slot.elems, slot.end = max(slot.elems, n), last[b]
		owner[b] = slot
	}
	if len(rename) == 0 {
		return f
	}
	flat := map[*loopir.Buffer]*loopir.Buffer{}
	for _, s := range slots {
		nb := *s.buf
		nb.Shape, nb.Strides = []loopir.Expr{loopir.Int(s.elems)}, nil
		flat[s.buf] = &nb
	}
	target := func(b *loopir.Buffer) *loopir.Buffer {
		if r, ok := rename[b]; ok {
			b = r
		}
		if r, ok := flat[b]; ok {
			return r
		}
		return b
	}
	out := loopir.MapStmt(seq, func(e loopir.Expr) loopir.Expr {
		switch x := e.(type) {
		case *loopir.Load:
			return &loopir.Load{Buf: target(x.Buf), Index: x.Index}
		case *loopir.Address:
			return &loopir.Address{Buf: target(x.Buf), Index: x.Index}
		}
		return e
	}, func(s loopir.Stmt) loopir.Stmt {
		if st, ok := s.(*loopir.Store); ok {
			return &loopir.Store{Buf: target(st.Buf), Index: st.Index, Value: st.Value}
		}
		return nil
	})
	for i := len(allocs) - 1; i >= 0; i-- {
		if _, gone := rename[allocs[i]]; gone {
			continue
		}
		out = &loopir.Allocate{Buf: target(allocs[i]), Body: out}
	}
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: out, NoContract: f.NoContract}
}

func firstUse(first map[*loopir.Buffer]int, b *loopir.Buffer) int {
	if i, ok := first[b]; ok {
		return i
	}
	return 1 << 30
}

func constElems(b *loopir.Buffer) (int64, bool) {
	c, ok := b.Elements().(*loopir.IntImm)
	if !ok {
		return 0, false
	}
	return c.V, true
}

// touched lists the buffers a statement loads, stores or passes to an intrinsic.
func touched(st loopir.Stmt) map[*loopir.Buffer]bool {
	out := map[*loopir.Buffer]bool{}
	loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
		switch x := e.(type) {
		case *loopir.Load:
			out[x.Buf] = true
		case *loopir.Address:
			out[x.Buf] = true
		}
		return e
	}, func(s loopir.Stmt) loopir.Stmt {
		if x, ok := s.(*loopir.Store); ok {
			out[x.Buf] = true
		}
		return nil
	})
	return out
}
