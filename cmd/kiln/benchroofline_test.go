//go:build !serveonly

package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/roofline"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// writeConvModel writes y = Relu(Conv(x, W)): x float32 [1, 4, 16, 16], W a constant
// [8, 4, 3, 3], padding 1 (one kernel: the convolution with its fused Relu).
func writeConvModel(t *testing.T, dir string) string {
	t.Helper()
	s := func(v string) *string { return &v }
	v17, f32, ints := int64(17), int32(onnxpb.TensorProto_FLOAT), onnxpb.AttributeProto_INTS
	vi := func(name string, ds ...int64) *onnxpb.ValueInfoProto {
		sh := &onnxpb.TensorShapeProto{}
		for _, d := range ds {
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: sh}}}}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, 8*4*3*3)
	for i := range w {
		w[i] = rng.Float32() - 0.5
	}
	g := &onnxpb.GraphProto{Name: s("g"),
		Node: []*onnxpb.NodeProto{
			{OpType: s("Conv"), Input: []string{"x", "W"}, Output: []string{"c"}, Name: s("conv"),
				Attribute: []*onnxpb.AttributeProto{{Name: s("pads"), Type: &ints, Ints: []int64{1, 1, 1, 1}}}},
			{OpType: s("Relu"), Input: []string{"c"}, Output: []string{"y"}, Name: s("relu")},
		},
		Initializer: []*onnxpb.TensorProto{{Name: s("W"), DataType: &f32, Dims: []int64{8, 4, 3, 3}, FloatData: w}},
		Input:       []*onnxpb.ValueInfoProto{vi("x", 1, 4, 16, 16)}, Output: []*onnxpb.ValueInfoProto{vi("y", 1, 8, 16, 16)}}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "conv.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchRooflinePrintsEachKernelsWork: kiln bench --roofline on one thread prints
// the machine's two roofs timed by the thread's CPU time, then the convolution's
// kernel with its kind, shape, exact MFLOP (2·8·16·16·4·3·3) and MB (x, W and y once),
// the rates and its share of the roofline.
func TestBenchRooflinePrintsEachKernelsWork(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		if _, err := exec.LookPath("cc"); err != nil {
			testdata.NoCompiler(t, err)
		}
	}
	defer func(o roofline.Options) { rooflineMeasure = o }(rooflineMeasure)
	rooflineMeasure = roofline.Options{Reps: 1, PeakIters: 100_000, ArrayBytes: 1 << 20}
	dir := t.TempDir()
	model := writeConvModel(t, dir)
	cmd := benchCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--roofline", "--threads", "1", "--iters", "5", "--warmup", "1", "-q", "--cache-dir", filepath.Join(dir, "journal"), model})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench --roofline: %v\n%s", err, out.String())
	}
	text := out.String()
	if !regexp.MustCompile(`roofline on .*1 thread\(s\): FMA peak [0-9.]+ GFLOP/s .* memory bandwidth [0-9.]+ GB/s \(STREAM triad over 3 arrays of 1 MiB`).MatchString(text) {
		t.Errorf("no roofline line:\n%s", text)
	}
	if !strings.Contains(text, "kernels timed by thread CPU time per launch, the median over 5 runs") {
		t.Errorf("the kernels' clock and runs are not stated:\n%s", text)
	}
	// MFLOP 2·8·256·36 = 147456 FLOPs; MB 4·(1024 + 288 + 2048) = 13440 bytes
	row := regexp.MustCompile(`(?m)^[0-9.]+ +1 +regular +k3x3 s1 4->8 16x16->16x16 +0\.15 +0\.013 +[0-9.]+ +[0-9.]+ +[0-9.]+% +(FMA|memory) +v_k_conv_relu_[0-9a-f]+: Conv "conv"$`)
	if !row.MatchString(text) {
		t.Errorf("no row for the convolution's kernel:\n%s", text)
	}
	if !strings.Contains(text, "kernel time per inference:") {
		t.Errorf("no total:\n%s", text)
	}
}

// TestKernelWorkNamesWhatItCannotCount: a kernel whose plan names a node the model
// lacks (the passes made it), or one launched for groups of different work, is not
// counted and says why; a kernel launched twice for equal work is counted once.
func TestKernelWorkNamesWhatItCannotCount(t *testing.T) {
	b := graph.NewBuilder("main")
	f32 := func(s ...int64) graph.Type { return graph.TensorType(tensor.Float32, graph.StaticShape(s...)...) }
	x, y := b.Param("x", f32(4, 8)), b.Param("y", f32(8, 16))
	for _, name := range []string{"a", "b"} {
		if _, err := b.NodeNamed(graph.OpRelu, name, nil, []string{name + "_out"}, x); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.NodeNamed(graph.OpMatMul, "mm", nil, []string{"mm_out"}, x, y); err != nil {
		t.Fatal(err)
	}
	m := b.M
	st := &engine.Stats{Groups: []engine.Group{
		{Kernel: "relu", Anchor: `Relu "a"`}, {Kernel: "relu", Anchor: `Relu "b"`},
		{Kernel: "made", Anchor: `Conv "made by a pass"`},
		{Kernel: "mixed", Anchor: `Relu "a"`}, {Kernel: "mixed", Anchor: `MatMul "mm"`},
	}}
	works, why, err := kernelWork(m, map[string]*tensor.Tensor{}, st)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := works["relu"]; !ok || w.Bytes != 4*(32+32) || why["relu"] != "" {
		t.Errorf("relu: %+v (%q), want 256 bytes", w, why["relu"])
	}
	if _, ok := works["made"]; ok || !strings.Contains(why["made"], "not a node of the model") {
		t.Errorf("made: counted %v, why %q", ok, why["made"])
	}
	if _, ok := works["mixed"]; ok || !strings.Contains(why["mixed"], "launched for") {
		t.Errorf("mixed: counted %v, why %q", ok, why["mixed"])
	}
}
