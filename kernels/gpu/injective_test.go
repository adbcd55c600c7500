package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// cases are elementwise and broadcasting nodes, static and symbolic, whose element
// counts 256 does not divide (tails in the last block), and a fused chain.
func cases(t testing.TB) []gcase {
	cast := graph.OpCast.NewAttrs().(*graph.CastAttrs)
	cast.To = int64(tensor.Int32)
	syms := []map[string]int64{{"n": 1}, {"n": 7}, {"n": 70}}
	return []gcase{
		{name: "add_broadcast_static", op: graph.OpAdd, args: []graph.Type{ty(t, tensor.Float32, "2", "3", "45"), ty(t, tensor.Float32, "3", "1")},
			binds: []map[string]int64{{}}},
		{name: "add_broadcast_symbolic", op: graph.OpAdd, args: []graph.Type{ty(t, tensor.Float32, "n", "3", "5"), ty(t, tensor.Float32, "5")},
			binds: syms},
		{name: "relu_static", op: graph.OpRelu, args: []graph.Type{ty(t, tensor.Float32, "300")}, binds: []map[string]int64{{}}},
		{name: "relu_symbolic", op: graph.OpRelu, args: []graph.Type{ty(t, tensor.Float32, "n", "37")}, binds: syms},
		{name: "sigmoid_symbolic", op: graph.OpSigmoid, args: []graph.Type{ty(t, tensor.Float32, "b", "n", "11")},
			binds: []map[string]int64{{"b": 1, "n": 1}, {"b": 3, "n": 29}, {"b": 2, "n": 1000}}},
		{name: "mul_add_chain", op: graph.OpMul, args: []graph.Type{ty(t, tensor.Float32, "n", "40"), ty(t, tensor.Float32, "40")},
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, ty(t, tensor.Float32, "n", "40")}}}, binds: syms},
		{name: "cast_to_int32", op: graph.OpCast, attrs: cast, args: []graph.Type{ty(t, tensor.Float32, "n", "9")}, binds: syms},
		{name: "where_broadcast", op: graph.OpWhere, args: []graph.Type{ty(t, tensor.Bool, "n", "1"), ty(t, tensor.Float32, "n", "13"), ty(t, tensor.Float32, "13")}, binds: syms},
		{name: "transpose_symbolic", op: graph.OpTranspose, attrs: &graph.TransposeAttrs{Perm: []int64{2, 0, 1}}, args: []graph.Type{ty(t, tensor.Float32, "n", "6", "19")}, binds: syms},
		{name: "concat_symbolic", op: graph.OpConcat, attrs: &graph.AxisAttrs{Axis: 1}, args: []graph.Type{ty(t, tensor.Float32, "n", "3", "7"), ty(t, tensor.Float32, "n", "5", "7")}, binds: syms},
		{name: "gather_symbolic", op: graph.OpGather, attrs: &graph.GatherAttrs{Axis: 1}, args: []graph.Type{ty(t, tensor.Float32, "n", "6"), ty(t, tensor.Int64, "2", "3")}, binds: syms},
		{name: "gather_rows", op: graph.OpGather, attrs: &graph.GatherAttrs{Axis: 0}, args: []graph.Type{ty(t, tensor.Float32, "7", "n"), ty(t, tensor.Int64, "5")}, binds: syms},
	}
}

// TestInjectiveKernelsCompileToPTX lowers every case with the GPU strategy, prints it
// in CUDA C and compiles it with NVRTC for sm_80.
func TestInjectiveKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range cases(t) {
		l := lower(t, c, tg)
		src := l.cudaSource(t)
		ptx, err := nv.Compile(src.Code, c.name+".cu", cuda.CompileOptions{Arch: "sm_80"})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, src.Code)
		}
		if !strings.Contains(string(ptx), ".entry "+src.Kernels[0]) {
			t.Errorf("%s: the PTX has no entry %s", c.name, src.Kernels[0])
		}
	}
}

func TestInjectiveRuleBindsBlocksAndThreadsWithASymbolicGrid(t *testing.T) {
	c := cases(t)[1] // add_broadcast_symbolic: n × 3 × 5
	l := lower(t, c, testGPU(t))
	if got, want := l.launch.String(), "grid((((n * 15) + 255) / 256), 1, 1) block(256, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	trace := l.impl.Trace.String()
	for _, want := range []string{`split(`, `bind(`, `"blockIdx.x"`, `"threadIdx.x"`} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %s:\n%s", want, trace)
		}
	}
	if l.impl.Strategy != "gpu-injective" {
		t.Errorf("strategy %q", l.impl.Strategy)
	}
}

func TestInjectiveBlockIsCappedByTheTargetAndExactForSmallTensors(t *testing.T) {
	small := testGPU(t)
	small.GPU.MaxWorkGroup = 64
	l := lower(t, cases(t)[3], small) // relu over n × 37
	if got, want := l.launch.String(), "grid((((n * 37) + 63) / 64), 1, 1) block(64, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	tiny := gcase{name: "relu_tiny", op: graph.OpRelu, args: []graph.Type{ty(t, tensor.Float32, "5", "7")}}
	l = lower(t, tiny, testGPU(t))
	if got, want := l.launch.String(), "grid(1, 1, 1) block(35, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
}

func TestInjectiveRuleRefusesReductionsAndCPUTargets(t *testing.T) {
	st := gpu.Strategies(kernels.Default())
	b := graph.NewBuilder("main")
	x := b.Param("x", ty(t, tensor.Float32, "4", "8"))
	outs, err := b.Node(graph.OpSoftmax, nil, 1, x)
	if err != nil {
		t.Fatal(err)
	}
	in := []kernels.Input{{T: placeholder(t, outs[0].Def.Inputs[0])}}
	injective := func(s *schedule.Schedule) error { return gpu.ScheduleInjective(s, gpu.DefaultBlock) }
	if _, err := kernels.Generic(kernels.Default(), "softmax", outs[0].Def, in, injective); !errors.Is(err, gpu.ErrNotInjective) {
		t.Errorf("softmax: err = %v, want ErrNotInjective", err)
	}
	relu, err := b.Node(graph.OpRelu, nil, 1, x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lower(relu[0].Def, in, target.Host()); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("relu for the host: err = %v, want ErrNoKernel", err)
	}
	if _, err := gpu.BlockSize(target.Host()); err == nil {
		t.Error("a CPU target has a GPU block size")
	}
}

func placeholder(t testing.TB, v *graph.Value) *te.Tensor {
	t.Helper()
	return te.Placeholder("in0", v.Type.DType, kernels.Syms{}.Shape(v.Type.Shape)...)
}
