package vm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/devices"
)

// splitFloor and the quarter rule decide when a free block larger than a request is
// split (see take): smaller remainders would be slivers that rarely fit a later request,
// and every piece of a call coalesces again when the call ends.
const splitFloor = 64 << 10

// parent is one device buffer the pool allocated; its blocks tile [0, size) in address
// order, first at offset 0 (a split or a merge keeps the lower block, so first never
// changes).
type parent struct {
	dev   int
	buf   devices.Buffer
	size  int64
	first *block
	// image is the key of an image parent: one block, never split, listed in the
	// pool's images instead of a free list; nil for a buffer.
	image *imageKey
}

// block is the byte range [off, off+size) of a parent, either free (in its device's
// free list) or handed out to exactly one Storage (owner). Offsets are multiples of
// the device's alignment (DeviceAlign): a parent starts at 0 and splits cut at aligned
// lengths.
type block struct {
	par        *parent
	off, size  int64
	prev, next *block // address-order neighbours inside par
	free       bool
	owner      *Storage // the storage it is handed out as; nil while free
	seq        uint64   // when it became free: recency for best-fit ties and for LRU release
}

// whole: the block is all of its parent.
func (b *block) whole() bool { return b.prev == nil && b.next == nil }

// freeList is one device's free blocks ordered by size, then most recently freed first
// (seq is unique, so the order is total and a block's position is found by search).
type freeList []*block

func blockOrder(a, b *block) int {
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c
	}
	return cmp.Compare(b.seq, a.seq)
}

// fit is the index of the best fit for n bytes: the smallest free block of at least n
// bytes, the most recently freed of those; len(l) when none is large enough.
func (l freeList) fit(n int64) int {
	i, _ := slices.BinarySearchFunc(l, n, func(b *block, n int64) int {
		if b.size < n {
			return -1
		}
		return 1
	})
	return i
}

func (l *freeList) insert(b *block) {
	i, found := slices.BinarySearchFunc(*l, b, blockOrder)
	if found {
		panic(fmt.Sprintf("BUG: block [%d, %d) is already in the free list", b.off, b.off+b.size))
	}
	*l = slices.Insert(*l, i, b)
}

func (l *freeList) remove(b *block) {
	i, found := slices.BinarySearchFunc(*l, b, blockOrder)
	if !found || (*l)[i] != b {
		panic(fmt.Sprintf("BUG: block [%d, %d) is not in the free list", b.off, b.off+b.size))
	}
	*l = slices.Delete(*l, i, i+1)
}

// splitBlock cuts b after its first n bytes and returns the remainder, a new block.
func splitBlock(b *block, n int64) *block {
	if n <= 0 || n >= b.size {
		panic(fmt.Sprintf("BUG: splitting a %d-byte block at %d", b.size, n))
	}
	r := &block{par: b.par, off: b.off + n, size: b.size - n, prev: b, next: b.next}
	if b.next != nil {
		b.next.prev = r
	}
	b.next, b.size = r, n
	return r
}

// mergeBlocks joins b, a's upper neighbour, into a.
func mergeBlocks(a, b *block) {
	if a.next != b || b.prev != a || !a.free || !b.free {
		panic("BUG: merging blocks that are not free neighbours")
	}
	a.size += b.size
	a.next = b.next
	if b.next != nil {
		b.next.prev = a
	}
}

// roundUp rounds n up to a multiple of align.
func roundUp(n, align int64) int64 { return (n + align - 1) / align * align }

// checkLocked verifies the pool's invariants (for tests): every parent is tiled by its
// blocks without gap or overlap, no two free blocks are neighbours, the free lists hold
// exactly the free blocks in order (a free image: its key's list), each handed-out
// block has one owner that points back at it, and the byte counters add up.
func (p *pool) checkLocked() error {
	var inUse, free int64
	listed := 0
	for d, l := range p.free {
		if !slices.IsSortedFunc(l, blockOrder) {
			return fmt.Errorf("device %d: free list out of order", d)
		}
		listed += len(l)
	}
	for _, l := range p.images {
		listed += len(l)
	}
	nfree := 0
	for par := range p.parents {
		var off int64
		var prev *block
		for b := par.first; b != nil; prev, b = b, b.next {
			switch {
			case b.par != par || b.prev != prev || b.off != off || b.size <= 0 && !b.whole():
				return fmt.Errorf("parent of %d bytes: broken block chain at %d", par.size, off)
			case b.off%p.align[par.dev] != 0:
				return fmt.Errorf("block at unaligned offset %d", b.off)
			case b.free && prev != nil && prev.free:
				return fmt.Errorf("free neighbours at %d not coalesced", b.off)
			case b.free && b.owner != nil, !b.free && (b.owner == nil || b.owner.blk != b):
				return fmt.Errorf("block at %d: free=%v with owner %p", b.off, b.free, b.owner)
			}
			if b.free {
				free += b.size
				nfree++
				if par.image != nil {
					if !slices.Contains(p.images[*par.image], b) {
						return fmt.Errorf("free %v is not listed", *par.image)
					}
				} else {
					l := p.free[par.dev]
					if i, ok := slices.BinarySearchFunc(l, b, blockOrder); !ok || l[i] != b {
						return fmt.Errorf("free block at %d is not listed", b.off)
					}
				}
			} else {
				inUse += b.size
			}
			off += b.size
		}
		if off != par.size {
			return fmt.Errorf("blocks cover %d of a %d-byte parent", off, par.size)
		}
	}
	if nfree != listed || inUse != p.st.InUse || free != p.st.Free || p.st.Held != inUse+free || p.st.Buffers != len(p.parents) {
		return fmt.Errorf("accounting: %d listed/%d free blocks, in use %d (stats %d), free %d (stats %d), held %d, buffers %d/%d",
			listed, nfree, inUse, p.st.InUse, free, p.st.Free, p.st.Held, p.st.Buffers, len(p.parents))
	}
	return nil
}
