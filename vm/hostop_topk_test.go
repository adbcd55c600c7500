package vm_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TestTopKMatchesStableSort: the host TopK's values and indices equal the first k of a
// stable sort of each row along the axis (ties by position, NaN above every number), on
// rows with many equal values and NaNs, for k from 0 to the whole row (the heap's range
// and the full sort's), largest and smallest, float32 and int64, the axis in the middle.
func TestTopKMatchesStableSort(t *testing.T) {
	const outer, d, inner = 3, 50, 4
	r := rand.New(rand.NewPCG(1, 2))
	f := make([]float32, outer*d*inner)
	n := make([]int64, len(f))
	for i := range f {
		n[i] = int64(r.IntN(9)) - 4
		f[i] = float32(n[i]) / 2
		if r.IntN(10) == 0 {
			f[i] = float32(math.NaN())
		}
	}
	shape := tensor.Shape{outer, d, inner}
	for _, x := range []*tensor.Tensor{tensor.MustFromSlice(shape, f), tensor.MustFromSlice(shape, n)} {
		vals := x.Float64s()
		for _, largest := range []int64{1, 0} {
			before := func(a, b float64) bool {
				na, nb := math.IsNaN(a), math.IsNaN(b)
				switch {
				case na || nb:
					return largest == 1 && na && !nb || largest == 0 && nb && !na
				case largest == 1:
					return a > b
				}
				return a < b
			}
			for _, k := range []int64{0, 1, 7, 24, 25, 26, 49, 50} {
				name := fmt.Sprintf("%v largest=%d k=%d", x.DType, largest, k)
				exe := stdExe(vm.HostTopK, vm.HostAttrs{ints("axis", 1), ints("largest", largest)}, 2)
				gotV, err := runStd(t, exe, vm.Limits{}, x, tensor.MustFromSlice(tensor.Shape{1}, []int64{k}))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				exe.Functions[0].Code[1].Imm = 1
				gotI, err := runStd(t, exe, vm.Limits{}, x, tensor.MustFromSlice(tensor.Shape{1}, []int64{k}))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Equal(gotI[0].Shape, tensor.Shape{outer, int(k), inner}) {
					t.Fatalf("%s: indices of shape %v", name, gotI[0].Shape)
				}
				gv, gi := gotV[0].Float64s(), gotI[0].Int64s()
				for o := range outer {
					for i := range inner {
						pos := make([]int, d)
						for j := range pos {
							pos[j] = j
						}
						sort.SliceStable(pos, func(p, q int) bool {
							return before(vals[(o*d+pos[p])*inner+i], vals[(o*d+pos[q])*inner+i])
						})
						for j := range int(k) {
							at := (o*int(k)+j)*inner + i
							want := vals[(o*d+pos[j])*inner+i]
							if gi[at] != int64(pos[j]) || !(gv[at] == want || math.IsNaN(gv[at]) && math.IsNaN(want)) {
								t.Fatalf("%s: row (%d, %d) rank %d: got index %d value %v, want %d %v", name, o, i, j, gi[at], gv[at], pos[j], want)
							}
						}
					}
				}
			}
		}
	}
}
