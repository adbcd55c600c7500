package vm

import (
	"math/rand/v2"
	"testing"
)

// TestPlanArenasPlansEachDeviceApartAtItsAlignment: tensors on two devices live at
// the same time get one arena each (so they may share offsets), device 1's offsets are
// multiples of its 128-byte alignment, and device 0's plan is PlanMemory's.
func TestPlanArenasPlansEachDeviceApartAtItsAlignment(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 100; trial++ {
		n := 1 + r.IntN(30)
		iv := make([]Interval, n)
		var on0 []Interval
		for i := range iv {
			s := r.IntN(40)
			iv[i] = Interval{Size: int64(1 + r.IntN(3000)), Start: s, End: s + r.IntN(8), Device: r.IntN(2)}
			if iv[i].Device == 0 {
				on0 = append(on0, iv[i])
			}
		}
		a, err := PlanArenas(iv, []int64{PlanAlign, 128})
		if err != nil {
			t.Fatal(err)
		}
		want0, err := PlanMemory(on0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Sizes[0] != want0.Size {
			t.Fatalf("trial %d: device 0's arena is %d, PlanMemory's %d", trial, a.Sizes[0], want0.Size)
		}
		for d, al := range []int64{PlanAlign, 128} {
			var sub []Interval
			p := Plan{Size: a.Sizes[d]}
			for i, x := range iv {
				if x.Device != d {
					continue
				}
				if a.Offsets[i]%al != 0 {
					t.Fatalf("trial %d: tensor %d on device %d at offset %d, not a multiple of %d", trial, i, d, a.Offsets[i], al)
				}
				sub = append(sub, x)
				p.Offsets = append(p.Offsets, a.Offsets[i])
			}
			checkPlan(t, sub, p)
		}
	}
}

func TestPlanArenasRefusesAnIntervalOnAnUnknownDeviceAndABadAlignment(t *testing.T) {
	if _, err := PlanArenas([]Interval{{Size: 8, Device: 2}}, []int64{64, 128}); err == nil {
		t.Fatal("a tensor on device 2 of 2 was planned")
	}
	if _, err := PlanArenas([]Interval{{Size: 8}}, []int64{96}); err == nil {
		t.Fatal("an alignment of 96 was accepted")
	}
}
