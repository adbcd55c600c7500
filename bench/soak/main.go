// Command soak runs one generic executable (compiled once, symbolic dims free) on many
// inferences of random shapes and watches the process's resident memory: a
// check that serving changing shapes does not grow memory without bound (apache/tvm#7763
// is the failure it guards against).
//
//	go run ./bench/soak [--model ../shared/zoo/bert_tiny/model.onnx] [--n 10000]
//	    [--max-seq 512] [--max-batch 1] [--threads 2] [--seed 1]
//
// It prints, every tenth of the run, the inferences done, the resident set size (RSS,
// from /proc/self/statm), the VM pool's bytes (held, in use, free) and device
// allocations, and at the end the RSS growth from the first 10% of the run to the end;
// the exit status is 1 when that growth is 10% or more (--max-growth).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kilnrt/kiln/compiler"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

func main() {
	model := flag.String("model", "../shared/zoo/bert_tiny/model.onnx", "an ONNX model with symbolic input dims")
	n := flag.Int("n", 10000, "inferences")
	maxSeq := flag.Int64("max-seq", 512, "largest value of a non-batch symbol")
	maxBatch := flag.Int64("max-batch", 1, "largest value of the symbol named batch")
	threads := flag.Int("threads", 2, "CPU threads")
	seed := flag.Uint64("seed", 1, "random seed")
	maxGrowth := flag.Float64("max-growth", 0.10, "largest RSS growth allowed after the first tenth")
	flag.Parse()
	if err := run(*model, *n, *maxSeq, *maxBatch, *threads, *seed, *maxGrowth); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(path string, n int, maxSeq, maxBatch int64, threads int, seed uint64, maxGrowth float64) error {
	m, err := onnx.Load(path, onnx.Options{})
	if err != nil {
		return err
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: threads})
	if err != nil {
		return err
	}
	defer dev.Close()
	start := time.Now()
	e, err := engine.New(engine.Config{Target: target.Host(), Device: dev, Compiler: compiler.JIT{}})
	if err != nil {
		return err
	}
	l, err := e.Load(context.Background(), engine.InMemory(path, m), nil, nil)
	if err != nil {
		return fmt.Errorf("compiling %s with its dims free: %w", path, err)
	}
	exe, machine := l.Exe, l.Runner
	defer machine.Close()
	fmt.Printf("%s: compiled once in %.2fs (generic, %d kernels); %d inferences, symbols up to %d (batch up to %d), %d threads, %s, %d cores\n",
		path, time.Since(start).Seconds(), len(exe.Kernels), n, maxSeq, maxBatch, threads, runtime.GOARCH, runtime.NumCPU())
	rng := rand.New(rand.NewPCG(seed, 7))
	var base int64
	t0 := time.Now()
	for i := 1; i <= n; i++ {
		args, err := randomArgs(rng, m, maxSeq, maxBatch)
		if err != nil {
			return err
		}
		if _, err := machine.Run(context.Background(), args); err != nil {
			return fmt.Errorf("inference %d: %w", i, err)
		}
		if i%max(n/10, 1) == 0 || i == n {
			rss := rssBytes()
			if base == 0 {
				base = rss
			}
			st := machine.MemoryStats()
			fmt.Printf("%6d inferences %6.1fs  rss %7.1f MiB  pool held %7.1f MiB (in use %.1f, free %.1f)  device allocs %d  hits %d misses %d splits %d\n",
				i, time.Since(t0).Seconds(), mib(rss), mib(st.Held), mib(st.InUse), mib(st.Free), st.Allocs, st.Hits, st.Misses, st.Splits)
		}
	}
	growth := float64(rssBytes()-base) / float64(base)
	fmt.Printf("RSS growth after the first tenth: %+.1f%% (limit %.0f%%)\n", 100*growth, 100*maxGrowth)
	if growth >= maxGrowth {
		return fmt.Errorf("resident memory grew %.1f%% after the first tenth of the run", 100*growth)
	}
	return nil
}

// randomArgs binds the symbols of the inputs at random and makes inputs of those shapes
// (floats in [-1, 1), integers 0 or 1: valid ids, masks and types).
func randomArgs(rng *rand.Rand, m *graph.Module, maxSeq, maxBatch int64) ([]*tensor.Tensor, error) {
	env := map[string]int64{}
	var args []*tensor.Tensor
	for _, p := range m.Main.Params {
		shape := tensor.Shape{}
		for _, d := range p.Type.Shape {
			for _, s := range d.Symbols() {
				if _, ok := env[s]; !ok {
					if s == "batch" {
						env[s] = 1 + rng.Int64N(maxBatch)
					} else {
						env[s] = 1 + rng.Int64N(maxSeq)
					}
				}
			}
			v, ok := d.Eval(env)
			if !ok {
				return nil, fmt.Errorf("input %q: dim %v", p.Name, d)
			}
			shape = append(shape, int(v))
		}
		t := tensor.New(p.Type.DType, shape)
		switch x := t.Data.(type) {
		case []float32:
			for i := range x {
				x[i] = 2*rng.Float32() - 1
			}
		case []int64:
			for i := range x {
				x[i] = rng.Int64N(2)
			}
		}
		args = append(args, t)
	}
	return args, nil
}

// rssBytes reads the resident set size from /proc/self/statm (0 where there is none).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
