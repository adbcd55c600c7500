package vm

import (
	"math/rand/v2"
	"testing"
)

// TestPlanMemoryChain: a chain a→b→c→d where each tensor dies after the next is
// written needs only two live tensors at a time.
func TestPlanMemoryChain(t *testing.T) {
	iv := []Interval{{Size: 1000, Start: 0, End: 1}, {Size: 1000, Start: 1, End: 2}, {Size: 1000, Start: 2, End: 3}, {Size: 1000, Start: 3, End: 4}}
	p, err := PlanMemory(iv)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size != 2*1024 || p.Sum != 4*1024 {
		t.Fatalf("arena %d, sum %d; want 2048 and 4096", p.Size, p.Sum)
	}
	checkPlan(t, iv, p)
}

// TestPlanMemoryRandom checks on random lifetimes that live tensors never overlap and
// that the arena is never larger than the no-reuse total nor smaller than the peak of
// live bytes.
func TestPlanMemoryRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(40)
		iv := make([]Interval, n)
		for i := range iv {
			s := r.IntN(50)
			iv[i] = Interval{Size: int64(1 + r.IntN(5000)), Start: s, End: s + r.IntN(10)}
		}
		p, err := PlanMemory(iv)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, iv, p)
		peak := int64(0)
		for at := 0; at < 60; at++ {
			live := int64(0)
			for _, x := range iv {
				if x.Start <= at && at <= x.End {
					live += (x.Size + PlanAlign - 1) / PlanAlign * PlanAlign
				}
			}
			peak = max(peak, live)
		}
		if p.Size < peak || p.Size > p.Sum {
			t.Fatalf("trial %d: arena %d outside [peak %d, sum %d]", trial, p.Size, peak, p.Sum)
		}
	}
}

func checkPlan(t *testing.T, iv []Interval, p Plan) {
	t.Helper()
	for i := range iv {
		if p.Offsets[i]%PlanAlign != 0 || p.Offsets[i]+iv[i].Size > p.Size {
			t.Fatalf("tensor %d at %d (size %d) in a %d-byte arena", i, p.Offsets[i], iv[i].Size, p.Size)
		}
		for j := range i {
			timeOverlap := iv[i].Start <= iv[j].End && iv[j].Start <= iv[i].End
			spaceOverlap := p.Offsets[i] < p.Offsets[j]+iv[j].Size && p.Offsets[j] < p.Offsets[i]+iv[i].Size
			if timeOverlap && spaceOverlap {
				t.Fatalf("tensors %d and %d are live together and overlap", i, j)
			}
		}
	}
}
