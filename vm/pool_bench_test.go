package vm

import "testing"

// BenchmarkPoolStatic: one call's requests of a static plan (two inputs, an arena),
// taken and returned; every request is an exact hit on a whole buffer.
func BenchmarkPoolStatic(b *testing.B) {
	p, _ := newTestPool(true)
	sizes := []int64{4 * kib, 4 * kib, 3 * mib}
	ss := make([]*Storage, len(sizes))
	for b.Loop() {
		for i, n := range sizes {
			s, err := p.get(0, n)
			if err != nil {
				b.Fatal(err)
			}
			ss[i] = s
		}
		for _, s := range ss {
			p.put(s)
		}
	}
}
