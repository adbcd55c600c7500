package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestCachedCompileTimeoutNamesTheModel: through the journal the timeout covers the
// whole compile and the error names the model.
func TestCachedCompileTimeoutNamesTheModel(t *testing.T) {
	cfg := cpuConfig(t)
	j, err := compilecache.Open(compilecache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cfg.Journal, cfg.Timeout = j, 50*time.Millisecond
	src := engine.InMemory("chain/1", reluChain(t, 50_000))
	src.Digest = "chain-digest"
	_, err = newEngine(t, cfg).Executable(context.Background(), src, nil, nil)
	if !errors.Is(err, engine.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `model "chain/1": stage `) {
		t.Fatalf("got %v, want ErrTimeout naming model chain/1 and the stage", err)
	}
	t.Log(err)
}

// reluChain is n Relus in a row on a [4] input.
func reluChain(t *testing.T, n int) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	y := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4)))
	var err error
	for i := 0; i < n; i++ {
		if y, err = b.Op1(graph.OpRelu, nil, y); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
