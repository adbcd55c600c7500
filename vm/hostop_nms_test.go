package vm_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TestNMSGridMatchesAllPairs: with many candidates, NonMaxSuppression looks only at the
// kept boxes in a candidate's grid cells; it keeps exactly the boxes that comparing
// with every kept box keeps (written out below), for overlapping random boxes of many
// sizes (some spanning the whole field, some degenerate), thresholds 0, 0.3 and 0.7,
// and a negative threshold (every kept box suppresses: one box per class).
func TestNMSGridMatchesAllPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	const n, classes = 1500, 2
	bv := make([]float32, n*4)
	for i := 0; i < n; i++ {
		y, x := rng.Float32()*100, rng.Float32()*100
		h, w := rng.Float32()*30, rng.Float32()*30
		switch i % 50 {
		case 0:
			y, x, h, w = 0, 0, 100, 100
		case 1:
			h = 0
		}
		bv[i*4], bv[i*4+1], bv[i*4+2], bv[i*4+3] = y+h, x, y, x+w // corners in either order
	}
	sv := make([]float32, classes*n)
	for i := range sv {
		sv[i] = float32(rng.IntN(200)) / 200 // ties, kept in index order
	}
	boxes := tensor.MustFromSlice(tensor.Shape{1, n, 4}, bv)
	scores := tensor.MustFromSlice(tensor.Shape{1, classes, n}, sv)
	for _, th := range []float32{0, 0.3, 0.7, -0.1} {
		out, err := runStd(t, stdExe(vm.HostNMS, nil, 4), vm.Limits{}, boxes, scores,
			tensor.MustFromSlice(tensor.Shape{1}, []int64{math.MaxInt64}), tensor.MustFromSlice(tensor.Shape{1}, []float32{th}))
		if err != nil {
			t.Fatal(err)
		}
		if want := allPairsNMS(bv, sv, n, classes, float64(th)); !slices.Equal(out[0].Int64s(), want) {
			t.Errorf("threshold %v: %d rows, all pairs keep %d (first difference at %d)", th, out[0].Shape[0], len(want)/3, firstDiff(out[0].Int64s(), want))
		}
	}
}

func allPairsNMS(bv, sv []float32, n, classes int, th float64) []int64 {
	type rect struct{ y1, x1, y2, x2 float64 }
	rs := make([]rect, n)
	for i := range rs {
		p := bv[i*4 : i*4+4]
		rs[i] = rect{math.Min(float64(p[0]), float64(p[2])), math.Min(float64(p[1]), float64(p[3])), math.Max(float64(p[0]), float64(p[2])), math.Max(float64(p[1]), float64(p[3]))}
	}
	iou := func(a, b rect) float64 {
		inter := math.Max(0, math.Min(a.y2, b.y2)-math.Max(a.y1, b.y1)) * math.Max(0, math.Min(a.x2, b.x2)-math.Max(a.x1, b.x1))
		union := (a.y2-a.y1)*(a.x2-a.x1) + (b.y2-b.y1)*(b.x2-b.x1) - inter
		if union <= 0 {
			return 0
		}
		return inter / union
	}
	var sel []int64
	for c := 0; c < classes; c++ {
		sc := sv[c*n : (c+1)*n]
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case sc[a] > sc[b]:
				return -1
			case sc[a] < sc[b]:
				return 1
			}
			return 0
		})
		var kept []int
		for _, i := range order {
			ok := true
			for _, k := range kept {
				if iou(rs[i], rs[k]) > th {
					ok = false
					break
				}
			}
			if ok {
				kept = append(kept, i)
				sel = append(sel, 0, int64(c), int64(i))
			}
		}
	}
	return sel
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
