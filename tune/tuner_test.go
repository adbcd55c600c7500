package tune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The test binary is also the measuring child: with KILN_TUNE_TEST_CHILD set it answers
// one request, with a CPU backend whose Relu has three extra strategies: a copy of the
// generic rule (the default) and two deliberately broken ones.
func TestMain(m *testing.M) {
	if os.Getenv("KILN_TUNE_TEST_CHILD") != "" {
		os.Exit(ChildMain(context.Background(), os.Stdin, os.Stdout, os.Stderr, MeasureOptions{Backends: brokenBackends()}))
	}
	os.Exit(m.Run())
}

// brokenBackends is the CPU backend with Relu strategies "test-wrong" (computes x+1)
// and "test-crash" (reads 2^40 elements past its input).
func brokenBackends() compiler.Backends {
	cpu := compiler.CPUBackend()
	orig := cpu.Strategies
	cpu.Strategies = func(reg *kernels.Registry) *kernels.Strategies {
		s := orig(reg)
		broken := func(name string, at func(x *te.Tensor, i []loopir.Expr) loopir.Expr) kernels.Strategy {
			build := func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, _ target.Target, _ kernels.Knobs) (*kernels.Impl, error) {
				if len(epi) > 0 {
					return nil, kernels.ErrNotApplicable
				}
				x := in[0].T
				out := te.Compute("broken", x.Shape, func(i []loopir.Expr) loopir.Expr { return at(x, i) })
				f, err := te.Lower(kernels.KernelName(n), []*te.Tensor{x}, []*te.Tensor{out})
				if err != nil {
					return nil, err
				}
				sch := schedule.New(f)
				return &kernels.Impl{Func: sch.Func(), Trace: sch.Trace(), Params: []kernels.Param{{Input: 0}}}, nil
			}
			return kernels.Strategy{Name: name, Tuned: build,
				Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
					return build(n, in, nil, t, nil)
				}}
		}
		wrong := broken("test-wrong", func(x *te.Tensor, i []loopir.Expr) loopir.Expr {
			return te.Add(x.At(i...), loopir.Float(1, tensor.Float32))
		})
		crash := broken("test-crash", func(x *te.Tensor, i []loopir.Expr) loopir.Expr {
			return x.At(i[0], te.Add(i[1], loopir.Int(1<<40)))
		})
		return s.Then(graph.OpRelu, s.Fallback(), wrong, crash)
	}
	return compiler.Backends{target.CPU: cpu}
}

// reluModel writes an ONNX model y = Relu(x), x float32 [8, 256].
func reluModel(t *testing.T) string {
	t.Helper()
	s := func(v string) *string { return &v }
	v17, f32 := int64(17), int32(onnxpb.TensorProto_FLOAT)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range []int64{8, 256} {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	vi := func(name string, sh *onnxpb.TensorShapeProto) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: sh}}}}
	}
	g := &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{{OpType: s("Relu"), Input: []string{"x"}, Output: []string{"y"}, Name: s("relu")}},
		Input: []*onnxpb.ValueInfoProto{vi("x", shape)}, Output: []*onnxpb.ValueInfoProto{vi("y", nil)}}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "relu.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func needCompiler(t *testing.T) {
	t.Helper()
	if _, err := devcpu.FindCompiler(); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
}

// TestBrokenCandidatesAreInvalidAndTheTunerGoesOn: the Relu's space holds a candidate
// computing a wrong result and one that crashes its measuring process; the run
// measures the whole space, marks exactly those two invalid (with the reason), keeps
// every other candidate's speedup, and finishes.
func TestBrokenCandidatesAreInvalidAndTheTunerGoesOn(t *testing.T) {
	needCompiler(t)
	j, err := compilecache.Open(compilecache.Options{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	child := Child{Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{"KILN_TUNE_TEST_CHILD=1"}, Timeout: 2 * time.Minute}
	rep, err := Run(context.Background(), Options{Model: reluModel(t), Journal: j, Measurer: child, Trials: 100, Threads: 1, Reps: 2, PerRound: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != 1 {
		t.Fatalf("%d tasks, want the Relu alone", len(rep.Tasks))
	}
	task := rep.Tasks[0]
	why := map[string]string{}
	valid := 0
	for _, h := range task.history {
		if h.speedup > 0 {
			valid++
			continue
		}
		why[h.c.Strategy] = h.why
	}
	if task.space.size() != 16 || task.Trials != 15 {
		t.Fatalf("space of %d points, %d trials: want 16 points, all but the default measured", task.space.size(), task.Trials)
	}
	if len(why) != 2 || !strings.Contains(why["test-wrong"], "reference") || !strings.Contains(why["test-crash"], "crashed") {
		t.Fatalf("invalid candidates: %v; want test-wrong (wrong result) and test-crash (crashed)", why)
	}
	if valid != 13 || rep.Invalid != 2 {
		t.Fatalf("%d valid trials, %d invalid: want 13 and 2", valid, rep.Invalid)
	}
	if rep.Threads != 1 {
		t.Fatalf("the run measured at %d threads, it asked for 1", rep.Threads)
	}
	recs, err := j.TuningRecords(rep.Target)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Threads != 1 {
			t.Fatalf("record %+v does not carry the run's thread count (1)", r)
		}
	}
	fmt.Fprintf(os.Stderr, "best %s ×%.2f\n", task.Best, task.BestSpeedup)
}
