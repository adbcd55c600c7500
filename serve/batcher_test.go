package serve

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/tensor"
)

// TestDynamicBatching: concurrent requests of one row each run as fewer executions, and
// every request gets exactly the rows it would get alone.
func TestDynamicBatching(t *testing.T) {
	repo, _, _ := testRepo(t)
	s := openService(t, repo, t.TempDir())
	rowsOf := func(i int) *tensor.Tensor {
		x := tensor.New(tensor.Float32, tensor.Shape{1 + i%2, 8})
		for k := range x.Data.([]float32) {
			x.Data.([]float32)[k] = float32((k+3*i)%11)/5 - 1
		}
		return x
	}
	// alone first (no batcher): the expected answers
	const n = 12
	want := make([]*tensor.Tensor, n)
	for i := range n {
		resp, err := s.Infer(context.Background(), request(rowsOf(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = resp.Outputs[0].Data
	}
	m, _ := s.lookup("mlp", "")
	before, _ := s.Stats("mlp", "1")
	m.batcher = newBatcher(m, BatchSpec{MaxBatchSize: 8, Preferred: []int{4, 8}, MaxDelay: 50 * time.Millisecond})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Infer(context.Background(), request(rowsOf(i)))
			if err != nil {
				t.Error(err)
				return
			}
			got := resp.Outputs[0].Data
			if fmt.Sprint(got.Shape) != fmt.Sprint(want[i].Shape) || !near(got, want[i]) {
				t.Errorf("request %d: %v, alone it gave %v", i, got, want[i])
			}
		}()
	}
	wg.Wait()
	st, _ := s.Stats("mlp", "1")
	batches := 0
	for size, b := range st[0].Batches {
		count := b.ComputeInfer.Count - before[0].Batches[size].ComputeInfer.Count
		if count > 0 && size != 4 && size != 8 {
			t.Errorf("a batch of size %d: only the preferred sizes 4 and 8 are compiled", size)
		}
		batches += int(count)
	}
	t.Logf("%d requests (18 rows) ran as %d executions: %v", n, batches, st[0].Batches)
	if batches >= n || int64(batches) != st[0].ExecutionCount-n {
		t.Fatalf("%d batched executions for %d requests (execution count %d)", batches, n, st[0].ExecutionCount)
	}
	// a request with more rows than max_batch_size is refused, naming the limit
	big := tensor.New(tensor.Float32, tensor.Shape{9, 8})
	if _, err := s.Infer(context.Background(), request(big)); err == nil {
		t.Fatal("a 9-row request to a model batching at most 8")
	}
}
