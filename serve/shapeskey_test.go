package serve

import (
	"fmt"
	"testing"
)

// TestShapesKeyIsWhatFmtPrints: the variant key written by hand is fmt's print of the
// shape map (names sorted), for the signatures requests bring: one input, several,
// scalars, empty dims, a name that sorts before another's prefix.
func TestShapesKeyIsWhatFmtPrints(t *testing.T) {
	for _, shapes := range []map[string][]int64{
		nil,
		{"input": {1, 3, 224, 224}},
		{"input_ids": {1, 32}, "attention_mask": {1, 32}, "token_type_ids": {1, 32}},
		{"x": {}, "y": nil, "z": {0, -1}},
		{"ab": {2}, "a": {1}, "a_b": {3}, "B": {4}},
	} {
		if got, want := shapesKey(shapes), fmt.Sprint(shapes); got != want {
			t.Errorf("shapesKey(%v) = %q, want %q", shapes, got, want)
		}
	}
}

func BenchmarkShapesKey(b *testing.B) {
	shapes := map[string][]int64{"input_ids": {1, 32}, "attention_mask": {1, 32}, "token_type_ids": {1, 32}}
	b.ReportAllocs()
	for range b.N {
		_ = shapesKey(shapes)
	}
}
