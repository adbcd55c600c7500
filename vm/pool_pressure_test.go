package vm

import "testing"

// TestPoolBudgetLRU: over the budget, whole free buffers go back least recently freed
// first; buffers partly in use stay whatever the budget.
func TestPoolBudgetLRU(t *testing.T) {
	p, d := newTestPool(true)
	a, b, c := mustGet(t, p, mib), mustGet(t, p, 2*mib), mustGet(t, p, mib)
	aRoot, bRoot, cRoot := a.root, b.root, c.root // put clears a storage
	p.put(a)
	p.put(c)
	p.put(b) // free order: a, c, b
	checked(t, p, d)
	p.mu.Lock()
	p.budget = 3 * mib
	rel := p.overBudgetLocked()
	p.mu.Unlock()
	p.release(rel)
	if len(rel) != 1 || rel[0].buf != aRoot || d.liveBytes() != 3*mib {
		t.Fatalf("over a 3 MiB budget: released %d buffers, %d bytes left", len(rel), d.liveBytes())
	}
	part := mustGet(t, p, 3*mib/2) // splits b: b is no longer whole
	if part.root != bRoot || p.st.Splits != 1 {
		t.Fatal("1.5 MiB did not split the 2 MiB buffer")
	}
	p.mu.Lock()
	p.budget = 0
	rel = p.overBudgetLocked()
	p.mu.Unlock()
	p.release(rel)
	checked(t, p, d)
	if len(rel) != 1 || rel[0].buf != cRoot || p.st.Buffers != 1 || p.st.Free != mib/2 {
		t.Fatalf("budget 0 with a buffer in use: released %d, stats %+v", len(rel), p.st)
	}
	p.put(part) // whole again and over the budget: released at once
	checked(t, p, d)
	if d.liveBytes() != 0 || p.st.Releases != 3 {
		t.Fatalf("%d bytes left, stats %+v", d.liveBytes(), p.st)
	}
}

// TestPoolTrim returns every whole free buffer and keeps the ones in use.
func TestPoolTrim(t *testing.T) {
	p, d := newTestPool(true)
	a, b := mustGet(t, p, mib), mustGet(t, p, 3*mib)
	p.put(b)
	if n := p.trim(); n != 3*mib || d.liveBytes() != mib {
		t.Fatalf("trim returned %d bytes, %d left", n, d.liveBytes())
	}
	p.put(a)
	p.trim()
	checked(t, p, d)
	if d.liveBytes() != 0 || p.st.Held != 0 {
		t.Fatalf("%d bytes left, stats %+v", d.liveBytes(), p.st)
	}
}

// TestPoolAllocFailureTrims: an allocation the device refuses is retried after the
// pool returns its whole free buffers; with none to return, the error stands.
func TestPoolAllocFailureTrims(t *testing.T) {
	p, d := newTestPool(true)
	d.capacity = 4 * mib
	p.put(mustGet(t, p, 3*mib))
	big := mustGet(t, p, 3*mib+1) // no free block fits, and the device is full with it
	checked(t, p, d)
	if p.st.Releases != 1 || p.st.Allocs != 2 || d.liveBytes() != 3*mib+1 {
		t.Fatalf("stats %+v, %d bytes live", p.st, d.liveBytes())
	}
	if _, err := p.get(0, 2*mib); err == nil {
		t.Fatal("an allocation beyond the device's capacity succeeded")
	}
	checked(t, p, d)
	p.put(big)
	if _, err := p.get(0, 2*mib); err != nil { // splits big
		t.Fatal(err)
	}
	if p.st.Allocs != 2 || p.st.Splits != 1 {
		t.Fatalf("stats %+v", p.st)
	}
}
