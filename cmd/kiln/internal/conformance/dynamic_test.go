package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// dynamicCase is one zoo model of the one-executable check: compiled once, run on every
// data set and on random shapes. notYet, when set, is why the generic executable cannot
// be built yet: the test then checks that it fails for that reason (and fails itself
// once the model compiles, so that the entry gets updated).
type dynamicCase struct {
	model  string
	notYet string
}

var dynamicCases = []dynamicCase{
	{model: "control_flow"},
	{model: "bert_tiny"},
	{model: "gpt2_tiny"},
	{model: "lstm_tagger"},
	{model: "gru_speech"},
}

// randomShapes is how many random shape bindings each model runs besides its data sets.
const randomShapes = 20

// TestZooOneExecutable: each model compiles once,
// with its symbolic dims free, and that one executable matches ONNX Runtime's outputs on
// every data set and the reference evaluator on 20 random shapes (batch 1..8, sequence
// 1..512 with at most 512 tokens so the reference stays quick, control_flow 0..100
// steps); the engine counts the compiles.
func TestZooOneExecutable(t *testing.T) {
	runOneExecutable(t, CompiledOptions{Level: 3}, randomShapes)
}

// TestZooOneExecutableBoundsChecked runs the generic executables (symbolic kernels,
// their extents from run-time dims) with bounds-checked kernels on every data set and
// on a few random shapes (tails of every size): no access falls outside a buffer.
func TestZooOneExecutableBoundsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the dynamic zoo models a second time; skipped with -short")
	}
	runOneExecutable(t, CompiledOptions{Level: 3, BoundsCheck: true}, 5)
}

// runOneExecutable compiles each dynamic zoo model once with its symbolic dims free and
// compares that executable with ONNX Runtime's outputs on every data set and with the
// reference evaluator on as many random shapes as shapes says.
func runOneExecutable(t *testing.T, co CompiledOptions, shapes int) {
	zoo := testdata.Zoo(t)
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	run, compiles, closeEngine := GenericEngineWith(dev, co)
	t.Cleanup(func() { closeEngine(); dev.Close() })
	o := opts()
	o.Engine = run
	for _, c := range dynamicCases {
		t.Run(c.model, func(t *testing.T) {
			dir := filepath.Join(zoo, c.model)
			m, err := onnx.Load(filepath.Join(dir, "model.onnx"), onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sets, err := dataSets(dir)
			if err != nil || len(sets) == 0 {
				t.Fatalf("no data sets in %s: %v", dir, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if c.notYet != "" {
				r := runSet(ctx, m, sets[0], o)
				if r.Status == Pass {
					t.Fatalf("compiles generically now: move it off the notYet list (%q)", c.notYet)
				}
				if !contains(r.Reason, c.notYet) {
					t.Fatalf("fails for another reason than %q: %s", c.notYet, r.Reason)
				}
				t.Logf("not yet: %s", r.Reason)
				return
			}
			for _, set := range sets {
				if r := runSet(ctx, m, set, o); r.Status != Pass {
					t.Fatalf("%s: %s: %s", filepath.Base(set), r.Status, r.Reason)
				}
			}
			rng := rand.New(rand.NewPCG(6, uint64(len(c.model))))
			for i := range shapes {
				in, env := randomInputs(rng, m)
				got, err := run(ctx, m, in)
				if err != nil {
					t.Fatalf("shape %v: %v", env, err)
				}
				want, err := ref.Eval(m, in, ref.Options{Context: ctx})
				if err != nil {
					t.Fatalf("shape %v: reference: %v", env, err)
				}
				for k := range want {
					if mm := compareTensor(got[k].(*tensor.Tensor), want[k].(*tensor.Tensor), o.Tolerance); mm != nil {
						t.Fatalf("random shape %d %v: output %q: %s", i, env, m.Main.Results[k].Name, mm.Reason)
					}
				}
			}
			if n := compiles(m); n != 1 {
				t.Fatalf("%d compiles for %d data sets and %d random shapes, want 1", n, len(sets), shapes)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// randomInputs binds the model's symbols at random (a batch-like symbol 1..8, others
// 1..512, at most 512 elements of symbols' product) and makes inputs of those shapes:
// floats in [-1, 1), integer tensors 0 or 1 (valid token ids, masks and types for every
// zoo model), an integer scalar 0..100 (control_flow's steps).
func randomInputs(rng *rand.Rand, m *graph.Module) (map[string]ref.Value, map[string]int64) {
	env := map[string]int64{}
	for _, p := range m.Main.Params {
		for _, d := range p.Type.Shape {
			for _, s := range d.Symbols() {
				if _, ok := env[s]; ok {
					continue
				}
				if s == "batch" {
					env[s] = 1 + rng.Int64N(8)
				} else {
					env[s] = 1 + rng.Int64N(512)
				}
			}
		}
	}
	for prod(env) > 512 {
		for s := range env {
			if env[s] > 1 && prod(env) > 512 {
				env[s] = (env[s] + 1) / 2
			}
		}
	}
	in := map[string]ref.Value{}
	for _, p := range m.Main.Params {
		shape := tensor.Shape{}
		for _, d := range p.Type.Shape {
			v, ok := d.Eval(env)
			if !ok {
				panic(fmt.Sprintf("BUG: dim %v unbound", d))
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
				if len(shape) == 0 {
					x[i] = rng.Int64N(101)
				} else {
					x[i] = rng.Int64N(2)
				}
			}
		}
		in[p.Name] = t
	}
	return in, env
}

func prod(env map[string]int64) int64 {
	p := int64(1)
	for _, v := range env {
		p *= v
	}
	return p
}
