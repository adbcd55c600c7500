package conformance

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

func opts() Options {
	return Options{Engine: RefEngine, Tolerance: Tolerance{Atol: 1e-4, Rtol: 1e-3}, Timeout: 2 * time.Minute}
}

// writeCase writes a one-node Relu model with one data set.
func writeCase(t *testing.T, dir string, in, out []float32) {
	t.Helper()
	s := func(v string) *string { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(len(in))}}}}}}}}
	}
	v13 := int64(13)
	m := &onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: &v13}}, Graph: &onnxpb.GraphProto{
		Name: s("g"), Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi("y")},
		Node: []*onnxpb.NodeProto{{OpType: s("Relu"), Input: []string{"x"}, Output: []string{"y"}}},
	}}
	tp := func(v []float32) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Dims: []int64{int64(len(v))}, DataType: &f32, FloatData: v}
	}
	writeProto(t, filepath.Join(dir, "model.onnx"), m)
	writeProto(t, filepath.Join(dir, "test_data_set_0", "input_0.pb"), tp(in))
	writeProto(t, filepath.Join(dir, "test_data_set_0", "output_0.pb"), tp(out))
}

func TestRunnerOnHandMadeCases(t *testing.T) {
	root := t.TempDir()
	writeCase(t, filepath.Join(root, "good"), []float32{-1, 2}, []float32{0, 2})
	writeCase(t, filepath.Join(root, "bad"), []float32{-1, 2}, []float32{0, 3})
	cases, err := FindCases([]string{root})
	if err != nil || len(cases) != 2 {
		t.Fatalf("FindCases = %v, %v", cases, err)
	}
	if r := RunCase(filepath.Join(root, "good"), opts()); r.Status != Pass {
		t.Errorf("good case: %+v", r)
	}
	r := RunCase(filepath.Join(root, "bad"), opts())
	if r.Status != Fail || !strings.Contains(r.Reason, "got 2 want 3") {
		t.Errorf("bad case: %+v", r)
	}
	if _, err := FindCases([]string{t.TempDir()}); err == nil {
		t.Error("an empty folder should be an error")
	}
}

// A zoo assembled from symlinks (to case folders, and to data-set folders) is found and
// run like one of real folders.
func TestRunnerFollowsSymlinkedCasesAndDataSets(t *testing.T) {
	real, zoo := t.TempDir(), t.TempDir()
	writeCase(t, filepath.Join(real, "good"), []float32{-1, 2}, []float32{0, 2})
	linked := filepath.Join(real, "linked")
	writeCase(t, filepath.Join(real, "sets"), []float32{3, -4}, []float32{3, 0})
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{
		{filepath.Join(real, "good"), filepath.Join(zoo, "good")},
		{filepath.Join(real, "sets", "model.onnx"), filepath.Join(linked, "model.onnx")},
		{filepath.Join(real, "sets", "test_data_set_0"), filepath.Join(linked, "test_data_set_0")},
		{linked, filepath.Join(zoo, "linked")},
	} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	cases, err := FindCases([]string{zoo})
	if err != nil || len(cases) != 2 {
		t.Fatalf("FindCases = %v, %v; want the two linked cases", cases, err)
	}
	for _, c := range cases {
		if r := RunCase(c, opts()); r.Status != Pass {
			t.Errorf("%s: %+v", c, r)
		}
	}
	if sets, err := dataSets(linked); err != nil || len(sets) != 1 {
		t.Errorf("dataSets(%s) = %v, %v; want the linked test_data_set_0", linked, sets, err)
	}
}

func TestCompareTensor(t *testing.T) {
	tol := Tolerance{Atol: 1e-4, Rtol: 1e-3}
	f := func(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	if m := compareTensor(f(1, nan, inf), f(1.0005, nan, inf), tol); m != nil {
		t.Errorf("within tolerance: %v", m.Reason)
	}
	for _, c := range [][2]*tensor.Tensor{
		{f(1, 2), f(1, 2.01)}, {f(nan), f(1)}, {f(1), f(nan)}, {f(inf), f(-inf)}, {f(1, 2), f(1)},
		{tensor.MustFromSlice(tensor.Shape{1}, []int64{3}), tensor.MustFromSlice(tensor.Shape{1}, []int64{4})},
	} {
		if m := compareTensor(c[0], c[1], tol); m == nil {
			t.Errorf("%v vs %v compared equal", c[0], c[1])
		}
	}
}

// TestZoo is the acceptance check of the reference evaluator on the real models.
func TestZoo(t *testing.T) {
	zoo := testdata.Zoo(t)
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 8 {
		t.Fatalf("found %d zoo cases, want 8", len(cases))
	}
	runAllPass(t, cases, opts())
}

// runAllPass runs every case and fails the test for each one that does not pass.
func runAllPass(t *testing.T, cases []string, o Options) {
	t.Helper()
	for _, c := range cases {
		r := RunCase(c, o)
		if r.Status != Pass {
			t.Errorf("%s: %s: %s", r.Case, r.Status, r.Reason)
		} else {
			t.Logf("%s: pass in %.2fs, max err %.2g", r.Case, r.Seconds, r.MaxErr)
		}
	}
}

// TestNodeSuite runs the ONNX backend node tests on the reference evaluator: at least
// 910 must pass (922 when last counted), none may fail (a case whose stored data
// contradicts its model is reported apart, with the proof), and every case that does
// not pass must say why (no crash, no silent failure).
func TestNodeSuite(t *testing.T) {
	s, n := runNodeSuite(t, opts(), "panic")
	t.Logf("node suite: %v", s)
	if s.Passed < 910 {
		t.Errorf("only %d of %d node cases pass, want at least 910", s.Passed, n)
	}
	if s.Failed > 0 {
		t.Errorf("%d node cases fail on the reference evaluator, want none", s.Failed)
	}
}

// runNodeSuite runs the ONNX node tests (skipped with -short) and fails the test for
// every case that does not pass without a reason or whose reason contains a forbidden
// word; it returns the counts and the number of cases.
func runNodeSuite(t *testing.T, o Options, forbidden ...string) (Summary, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("the node suite takes a while; skipped with -short")
	}
	root := filepath.Join(testdata.ONNXData(t), "node")
	cases, err := FindCases([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	var results []Result
	for _, c := range cases {
		r := RunCase(c, o)
		if r.Status != Pass && r.Reason == "" {
			t.Errorf("%s: %s without a reason", r.Case, r.Status)
		}
		for _, w := range forbidden {
			if strings.Contains(r.Reason, w) {
				t.Errorf("%s: %s", r.Case, r.Reason)
				break
			}
		}
		results = append(results, r)
	}
	return Summarize(results), len(cases)
}

// compiledOpts runs cases on the compiled engine (kernels built by the C compiler); it
// skips the test when there is none.
func compiledOpts(t *testing.T) Options {
	t.Helper()
	return compiledOptsAt(t, 3)
}

func compiledOptsAt(t *testing.T, level int) Options {
	t.Helper()
	return compiledOptsWith(t, CompiledOptions{Level: level})
}

func compiledOptsWith(t *testing.T, co CompiledOptions) Options {
	t.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	run, closeEngine := CompiledEngineWith(dev, co)
	t.Cleanup(func() { closeEngine(); dev.Close() })
	o := opts()
	o.Engine, o.Timeout = run, 5*time.Minute
	return o
}

// TestZooCompiled: every zoo model, every data set, on
// kernels kiln generated itself, against ONNX Runtime's outputs.
func TestZooCompiled(t *testing.T) {
	zoo := testdata.Zoo(t)
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	runAllPass(t, cases, compiledOpts(t)) // times include each model's compile
}

// TestZooCompiledO0: the zoo matches without the optimizing passes too (no fusion, no
// layouts, no recognized ops): what O3 changes must not change the results.
func TestZooCompiledO0(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the zoo a second time; skipped with -short")
	}
	zoo := testdata.Zoo(t)
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	runAllPass(t, cases, compiledOptsAt(t, 0))
}

// TestZooBoundsChecked: every zoo model, every data set, compiled with bounds-checked
// kernels (every load and store checked against its buffer's extent) matches ONNX
// Runtime's outputs; a check that fires fails the case with vm.ErrOutOfBounds naming
// the kernel, the node, the buffer and the offset: a compiler bug.
func TestZooBoundsChecked(t *testing.T) {
	zoo := testdata.Zoo(t)
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	runAllPass(t, cases, compiledOptsWith(t, CompiledOptions{Level: 3, BoundsCheck: true}))
}

// TestNodeSuiteCompiled runs the node suite on the compiled engine: at least 910 pass
// (926 when last counted), none fails, and no case may crash or be refused without a
// reason.
func TestNodeSuiteCompiled(t *testing.T) {
	if testing.Short() {
		t.Skip("the node suite takes a while; skipped with -short")
	}
	s, n := runNodeSuite(t, compiledOpts(t), "panic", "BUG")
	t.Logf("node suite, compiled engine: %v", s)
	if s.Passed < 910 {
		t.Errorf("only %d of %d node cases pass on the compiled engine, want at least 910 (926 when last counted)", s.Passed, n)
	}
	if s.Failed > 0 {
		t.Errorf("%d node cases fail on the compiled engine, want none", s.Failed)
	}
}

// writeProto writes msg's wire form to path, making its folder.
func writeProto(t *testing.T, path string, msg proto.Message) {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
