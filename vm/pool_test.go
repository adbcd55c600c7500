package vm

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

const kib, mib = 1 << 10, 1 << 20

func newTestPool(slicing bool) (*pool, *fakeDev) {
	d := newFakeDev()
	if slicing {
		return newPool([]devices.Device{slicer{d}}), d
	}
	return newPool([]devices.Device{d}), d
}

// TestPoolStaticHits: the same sizes every call are exact hits on whole buffers after
// the first call (no device allocation, no view).
func TestPoolStaticHits(t *testing.T) {
	p, d := newTestPool(true)
	sizes := []int64{4 * kib, 4 * kib, 3*mib + 5, 100}
	for call := 0; call < 10; call++ {
		var ss []*Storage
		for _, n := range sizes {
			s := mustGet(t, p, n)
			if call > 0 && (s.Buf.(*fakeBuf).root != nil || s.Buf != s.root) {
				t.Fatalf("call %d: a %d-byte request got a view", call, n)
			}
			ss = append(ss, s)
		}
		for _, s := range ss {
			p.put(s)
		}
		checked(t, p, d)
	}
	if d.allocs != len(sizes) || p.st.Hits != 9*uint64(len(sizes)) || p.st.Splits != 0 {
		t.Fatalf("%d device allocations, stats %+v", d.allocs, p.st)
	}
}

// TestPoolBestFit: the smallest free block that fits, the most recently freed of equals.
func TestPoolBestFit(t *testing.T) {
	p, d := newTestPool(true)
	a, b, c, c2 := mustGet(t, p, 100*kib), mustGet(t, p, 300*kib), mustGet(t, p, 200*kib), mustGet(t, p, 200*kib)
	bRoot, cRoot, c2Root := b.root, c.root, c2.root // put clears a storage
	for _, s := range []*Storage{a, b, c, c2} {
		p.put(s)
	}
	s := mustGet(t, p, 150*kib) // 200 KiB fits best; 50 KiB left is below splitFloor
	if s.root != c2Root || s.blk.size != 200*kib || p.st.Splits != 0 {
		t.Fatalf("150 KiB got a %d-byte block (want the last freed 200 KiB one)", s.blk.size)
	}
	viewOK(t, s)
	s2 := mustGet(t, p, 150*kib)
	if s2.root != cRoot {
		t.Fatal("second 150 KiB request did not get the other 200 KiB block")
	}
	s3 := mustGet(t, p, 150*kib) // 300 KiB: remainder 150 KiB ≥ 64 KiB and ≥ 150/4 KiB
	if s3.root != bRoot || s3.blk.size != 150*kib || p.st.Splits != 1 {
		t.Fatalf("third request: block of %d bytes, %d splits", s3.blk.size, p.st.Splits)
	}
	for _, s := range []*Storage{s, s2, s3} {
		p.put(s)
	}
	checked(t, p, d)
	if d.allocs != 4 || p.st.Free != 800*kib || len(p.free[0]) != 4 {
		t.Fatalf("%d allocations, %d free bytes in %d blocks", d.allocs, p.st.Free, len(p.free[0]))
	}
}

// TestPoolSplitCoalesce: requests carve one buffer at aligned offsets, and the pieces
// coalesce into the whole buffer again in any order of return.
func TestPoolSplitCoalesce(t *testing.T) {
	p, d := newTestPool(true)
	p.put(mustGet(t, p, 2*mib))
	sizes := []int64{100*kib + 3, 1, 0, 300 * kib, 77}
	var ss []*Storage
	var off int64
	for _, n := range sizes {
		s := mustGet(t, p, n)
		viewOK(t, s)
		if s.base != off {
			t.Fatalf("a %d-byte request at %d, want %d", n, s.base, off)
		}
		off += roundUp(max(n, 1), PlanAlign)
		ss = append(ss, s)
		checked(t, p, d)
	}
	if d.allocs != 1 || p.st.Splits != uint64(len(sizes)) {
		t.Fatalf("%d device allocations, %d splits", d.allocs, p.st.Splits)
	}
	for _, i := range []int{1, 3, 0, 4, 2} {
		p.put(ss[i])
		checked(t, p, d)
	}
	if l := p.free[0]; len(l) != 1 || !l[0].whole() || l[0].size != 2*mib {
		t.Fatalf("after all returns: %d free blocks", len(l))
	}
}

// TestPoolExactWithoutSlicer: a device without views gets exact-size hits only.
func TestPoolExactWithoutSlicer(t *testing.T) {
	p, d := newTestPool(false)
	p.put(mustGet(t, p, mib))
	s := mustGet(t, p, 1000)
	if s.Buf.(*fakeBuf).root != nil || d.allocs != 2 {
		t.Fatalf("%d allocations", d.allocs)
	}
	p.put(s)
	p.put(mustGet(t, p, mib))
	checked(t, p, d)
	if d.allocs != 2 || p.st.Splits != 0 {
		t.Fatalf("%d allocations, %d splits", d.allocs, p.st.Splits)
	}
}

// TestPoolReturnTwiceIsABug: a storage returned twice panics with BUG.
func TestPoolReturnTwiceIsABug(t *testing.T) {
	p, _ := newTestPool(true)
	s := mustGet(t, p, 10)
	p.put(s)
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "BUG:") {
			t.Fatalf("second return: %v", r)
		}
	}()
	p.put(s)
}

// TestViewInSplitStorage: a tensor at an offset inside a split storage is viewed from
// the parent buffer at the storage's base plus the tensor's offset.
func TestViewInSplitStorage(t *testing.T) {
	p, _ := newTestPool(true)
	m := &VM{devs: p.devs, pool: p}
	p.put(mustGet(t, p, mib))
	first := mustGet(t, p, 1000)
	s := mustGet(t, p, 256*kib)
	if s.base != 1024 {
		t.Fatalf("second storage at %d", s.base)
	}
	c := &call{m: m}
	for _, tc := range []struct{ off, elems int64 }{{0, 64 * kib}, {128, 100}, {0, 1}} {
		v, err := c.view(&Tensor{Storage: s, Offset: tc.off, DType: tensor.Float32, Shape: []int64{tc.elems}})
		if err != nil {
			t.Fatal(err)
		}
		fb := v.(*fakeBuf)
		if fb.root != s.root || fb.off != s.base+tc.off || fb.Size() != 4*tc.elems {
			t.Fatalf("tensor at %d: view [%d, +%d) of root %v", tc.off, fb.off, fb.Size(), fb.root == s.root)
		}
	}
	p.put(first)
	p.put(s)
}
