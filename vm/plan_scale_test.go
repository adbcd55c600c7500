package vm

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// bestFitByScan is the plan without an index: every placed tensor is looked at for
// every tensor placed. PlanMemory must give the same offsets while no tensor overlaps
// more than planOverlapLimit placed ones.
func bestFitByScan(iv []Interval) []int64 {
	off := make([]int64, len(iv))
	order := make([]int, len(iv))
	for i := range order {
		order[i] = i
	}
	size := func(i int) int64 { return (max(iv[i].Size, 1) + PlanAlign - 1) / PlanAlign * PlanAlign }
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(size(b), size(a)); c != 0 {
			return c
		}
		return cmp.Compare(iv[a].Start, iv[b].Start)
	})
	type span struct{ off, end int64 }
	var placed []int
	for _, i := range order {
		need := size(i)
		var busy []span
		for _, j := range placed {
			if iv[j].Start <= iv[i].End && iv[i].Start <= iv[j].End {
				busy = append(busy, span{off[j], off[j] + size(j)})
			}
		}
		slices.SortFunc(busy, func(a, b span) int { return cmp.Compare(a.off, b.off) })
		best, bestGap, top := int64(-1), int64(-1), int64(0)
		for _, s := range busy {
			if gap := s.off - top; gap >= need && (bestGap < 0 || gap < bestGap) {
				best, bestGap = top, gap
			}
			top = max(top, s.end)
		}
		if best < 0 {
			best = top
		}
		off[i] = best
		placed = append(placed, i)
	}
	return off
}

func TestPlanMemoryIndexMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		n := 1 + r.IntN(300)
		span := 1 + r.IntN(400)
		iv := make([]Interval, n)
		for i := range iv {
			s := r.IntN(span)
			iv[i] = Interval{Size: int64(1 + r.IntN(1<<r.IntN(16))), Start: s, End: s + r.IntN(1+r.IntN(60))}
		}
		p, err := PlanMemory(iv)
		if err != nil {
			t.Fatal(err)
		}
		if want := bestFitByScan(iv); !slices.Equal(p.Offsets, want) {
			t.Fatalf("trial %d: offsets differ from the scan", trial)
		}
		checkPlan(t, iv, p)
	}
}

// TestPlanMemoryScales: 300k tensors in a chain, and 100k tensors all alive together
// (the inputs of one Concat), are planned in about a second; the scan over every placed
// tensor took minutes.
func TestPlanMemoryScales(t *testing.T) {
	if testing.Short() {
		t.Skip("large plans: run without -short")
	}
	chain := make([]Interval, 300_000)
	for i := range chain {
		chain[i] = Interval{Size: 4096, Start: i, End: i + 1}
	}
	concat := make([]Interval, 100_000)
	for i := range concat {
		concat[i] = Interval{Size: int64(64 * (1 + i%7)), Start: i, End: len(concat)}
	}
	for _, c := range []struct {
		name     string
		iv       []Interval
		maxArena int64
	}{{"chain", chain, 2 * 4096}, {"concat", concat, 0}} {
		start := time.Now()
		done := make(chan Plan, 1)
		go func() {
			p, err := PlanMemory(c.iv)
			if err != nil {
				t.Error(err)
			}
			done <- p
		}()
		select {
		case p := <-done:
			t.Logf("%s of %d tensors: planned in %v, arena %d bytes of %d", c.name, len(c.iv), time.Since(start).Round(time.Millisecond), p.Size, p.Sum)
			if c.maxArena > 0 && p.Size > c.maxArena {
				t.Fatalf("%s: arena %d, want at most %d", c.name, p.Size, c.maxArena)
			}
			if p.Size > p.Sum {
				t.Fatalf("%s: arena %d above the sum %d", c.name, p.Size, p.Sum)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s of %d tensors: not planned in a minute", c.name, len(c.iv))
		}
	}
}
