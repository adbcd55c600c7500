package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestBoundsSizeMemory: with max_batch_size bounding the MLP's only free dim, the
// generic executable's pool is sized for batch 16 when it is built, so requests of any
// batch size up to the bound allocate no device memory; without bounds the pool grows
// when a larger batch comes.
func TestBoundsSizeMemory(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		repo, _, _ := testRepo(t)
		if bounded {
			writeConfig(t, repo, "mlp", `
name: "mlp"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [ 4 ] } ]
`)
		}
		s := openSpecializing(t, repo, t.TempDir(), 1000) // the generic executable only
		infer := func(rows int) {
			t.Helper()
			if _, err := s.Infer(context.Background(), request(tensor.New(tensor.Float32, tensor.Shape{rows, 8}))); err != nil {
				t.Fatal(err)
			}
		}
		infer(1)
		m, _ := s.lookup("mlp", "")
		cpu := m.places[0]
		if cpu.generic == nil {
			t.Fatalf("no generic executable: %s", cpu.noGen)
		}
		before := cpu.generic.machine.MemoryStats()
		for _, rows := range []int{16, 3, 16, 9} {
			infer(rows)
		}
		after := cpu.generic.machine.MemoryStats()
		if grew := after.Allocs > before.Allocs; grew == bounded {
			t.Errorf("bounded %v: device allocations %d after batch 1, %d after batches up to 16", bounded, before.Allocs, after.Allocs)
		}
		s.Close()
	}
}

func TestMaxDimsParameter(t *testing.T) {
	if b, err := parseMaxDims(" batch=8, seq = 512 "); err != nil || b["batch"] != 8 || b["seq"] != 512 {
		t.Errorf("parse: %v, %v", b, err)
	}
	for _, bad := range []string{"batch", "batch=0", "batch=x", "=3"} {
		if _, err := parseMaxDims(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	repo, _, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
name: "mlp"
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 8 ] } ]
parameters { key: "max_dims" value: { string_value: "seq=4" } }
`)
	s := openService(t, repo, t.TempDir())
	_, err := s.Infer(context.Background(), request(tensor.New(tensor.Float32, tensor.Shape{2, 8})))
	if err == nil || !strings.Contains(err.Error(), `"seq"`) {
		t.Errorf("max_dims naming no symbol of the model: %v", err)
	}
}
