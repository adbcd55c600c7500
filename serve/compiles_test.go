package serve

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kilnrt/kiln/tensor"
)

// squeezeRequest is a zero image for the bundled SqueezeNet.
func squeezeRequest() *InferRequest {
	x := tensor.New(tensor.Float32, tensor.Shape{1, 3, 224, 224})
	return &InferRequest{Model: "squeezenet1_1", Inputs: []Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 3, 224, 224}, Data: x}}}
}

// waitIdle waits until no compile holds a slot and returns how long that took.
func waitIdle(t *testing.T, s *Service, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for len(s.compiles) > 0 {
		if time.Since(start) > limit {
			t.Fatalf("a compile still holds its slot after %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestAbandonedCompileStopsAndOthersCompileMeanwhile: a slow model's first compile
// does not hold back another model's first request (compiles run side by side), and
// when the only client waiting for it gives up, the compile stops and the model stays
// READY (nothing was learned about it).
func TestAbandonedCompileStopsAndOthersCompileMeanwhile(t *testing.T) {
	s := openServiceWith(t, "../examples/models", t.TempDir(), Options{Compiles: 2})
	slow := make(chan error, 1)
	go func() { _, err := s.Infer(context.Background(), squeezeRequest()); slow <- err }()
	time.Sleep(50 * time.Millisecond) // squeezenet is compiling
	start := time.Now()
	x := tensor.New(tensor.Float32, tensor.Shape{3, 8})
	if _, err := s.Infer(context.Background(), &InferRequest{Model: "mlp", Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}, Data: x}}}); err != nil {
		t.Fatal(err)
	}
	mlpTook := time.Since(start)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	if mlpTook >= full {
		t.Fatalf("mlp's first request took %v, waiting for squeezenet's compile (%v)", mlpTook, full)
	}
	t.Logf("mlp answered after %v while squeezenet compiled for %v", mlpTook, full)

	s = openServiceWith(t, "../examples/models", t.TempDir(), Options{Compiles: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Infer(ctx, squeezeRequest()); !errors.Is(err, ErrDeadline) {
		t.Fatalf("a request that gives up while its model compiles: %v", err)
	}
	stopped := waitIdle(t, s, full)
	if stopped > full/2 {
		t.Fatalf("the abandoned compile ran %v more (a whole compile is %v)", stopped, full)
	}
	for _, st := range s.Index() {
		if st.Name == "squeezenet1_1" && st.State != StateReady {
			t.Fatalf("after an abandoned compile the model is %s (%s)", st.State, st.Reason)
		}
	}
	t.Logf("the abandoned compile stopped %v after its client left", stopped)
}
