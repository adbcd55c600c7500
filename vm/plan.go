package vm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/tensor"
)

// Interval is one tensor of a statically shaped region: Size bytes, written first at
// instruction Start and read last at instruction End (inclusive).
type Interval struct {
	Size       int64
	Start, End int
	// Device is the index of the device whose arena holds the tensor (PlanArenas;
	// PlanMemory ignores it).
	Device int
}

// Plan places a region's tensors in one arena.
type Plan struct {
	Offsets []int64 // per interval, in input order
	Size    int64   // arena bytes (the peak)
	Sum     int64   // bytes without reuse (every tensor its own allocation)
}

// PlanAlign is the alignment of every offset in a plan: a cache line, which is also the
// widest vector load the code generator emits.
const PlanAlign = 64

// PlanMemory is the static memory plan: tensors whose lifetimes overlap get disjoint
// byte ranges; the others may share. Largest tensors are placed first, each in the
// tightest gap left between the tensors already placed that are live at the same time
// (best fit), or above them all; a tensor live together with more than
// planOverlapLimit placed ones goes above them all at once. The placed tensors are
// indexed (plan_index.go), so a plan costs O(n log n) plus the gaps looked at. An End
// before its Start counts as Start. Sizes are checked: a negative one, or a sum of the
// aligned sizes that does not fit an int64, is an error wrapping tensor.ErrTooLarge or
// tensor.ErrShape (every offset and the arena are below that sum).
func PlanMemory(iv []Interval) (Plan, error) { return planAligned(iv, PlanAlign) }

// Arenas is a static memory plan with one arena per device.
type Arenas struct {
	Offsets []int64 // per interval, in input order, inside its device's arena
	Sizes   []int64 // per device: arena bytes (the peak; 0 where no tensor lives)
	Sum     int64   // bytes without reuse
}

// PlanArenas is PlanMemory with one arena per device: the intervals on device d
// (Interval.Device) are planned together with their offsets and sizes rounded to
// align[d] (DeviceAlign of the VM's device d; values below PlanAlign, or not a multiple
// of it, are an error). An interval on a device outside align is an error.
func PlanArenas(iv []Interval, align []int64) (Arenas, error) {
	a := Arenas{Offsets: make([]int64, len(iv)), Sizes: make([]int64, len(align))}
	for d, al := range align {
		if al < PlanAlign || al%PlanAlign != 0 || al > 1<<30 {
			return Arenas{}, fmt.Errorf("%w: device %d alignment %d is not a multiple of %d", tensor.ErrShape, d, al, PlanAlign)
		}
		var sub []Interval
		var at []int
		for i, t := range iv {
			if t.Device == d {
				sub, at = append(sub, t), append(at, i)
			}
		}
		p, err := planAligned(sub, al)
		if err != nil {
			return Arenas{}, fmt.Errorf("device %d: %w", d, err)
		}
		for j, i := range at {
			a.Offsets[i] = p.Offsets[j]
		}
		a.Sizes[d] = p.Size
		if a.Sum, err = tensor.CheckedAdd(a.Sum, p.Sum); err != nil {
			return Arenas{}, fmt.Errorf("the planned tensors' bytes: %w", err)
		}
	}
	for i, t := range iv {
		if t.Device < 0 || t.Device >= len(align) {
			return Arenas{}, fmt.Errorf("%w: planned tensor %d is on device %d of %d", tensor.ErrShape, i, t.Device, len(align))
		}
	}
	return a, nil
}

// planAligned is PlanMemory with offsets and sizes at multiples of align.
func planAligned(iv []Interval, align int64) (Plan, error) {
	p := Plan{Offsets: make([]int64, len(iv))}
	if len(iv) == 0 {
		return p, nil
	}
	iv = slices.Clone(iv)
	for i := range iv {
		iv[i].End = max(iv[i].End, iv[i].Start)
	}
	index := newPlanIndex(iv)
	order := make([]int, len(iv))
	for i := range order {
		order[i] = i
	}
	var total int64
	for i, t := range iv {
		if t.Size < 0 || t.Size > maxPlanned {
			return Plan{}, fmt.Errorf("%w: planned tensor %d has %d bytes", tensor.ErrTooLarge, i, t.Size)
		}
		var err error
		if total, err = tensor.CheckedAdd(total, (max(t.Size, 1)+align-1)/align*align); err != nil {
			return Plan{}, fmt.Errorf("the planned tensors' bytes: %w", err)
		}
	}
	size := func(i int) int64 { return (max(iv[i].Size, 1) + align - 1) / align * align }
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(size(b), size(a)); c != 0 {
			return c
		}
		return cmp.Compare(iv[a].Start, iv[b].Start)
	})
	type span struct{ off, end int64 }
	var busy []span
	for _, i := range order {
		need := size(i)
		p.Sum += need
		best := int64(-1)
		if index.overlapping(i) > planOverlapLimit {
			best = index.highest(i)
		} else {
			busy = busy[:0]
			index.each(i, func(j int) { busy = append(busy, span{p.Offsets[j], p.Offsets[j] + size(j)}) })
			slices.SortFunc(busy, func(a, b span) int { return cmp.Compare(a.off, b.off) })
			bestGap, top := int64(-1), int64(0)
			for _, s := range busy {
				if gap := s.off - top; gap >= need && (bestGap < 0 || gap < bestGap) {
					best, bestGap = top, gap
				}
				top = max(top, s.end)
			}
			if best < 0 {
				best = top
			}
		}
		p.Offsets[i] = best
		p.Size = max(p.Size, best+need)
		index.place(i, best, need)
	}
	return p, nil
}

// maxPlanned bounds one planned tensor so that aligning its size cannot overflow.
const maxPlanned = int64(1)<<62 - 1
