package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// rcase is a row case: a gcase, the strategy expected to lower it (any, when empty),
// and a rewrite of its drawn inputs (BatchNormalization's variance must not be
// negative).
type rcase struct {
	gcase
	strategy string
	fix      func(in map[string]ref.Value)
}

// rowCases are the softmax family on the last and a middle axis, the normalizations,
// and a fused epilogue, static and symbolic (a symbolic batch and a symbolic row
// length), with row counts the block of 64 does not divide.
func rowCases(t testing.TB) []rcase {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	syms := []map[string]int64{{"n": 1}, {"n": 7}, {"n": 70}}
	static := []map[string]int64{{}}
	softmax := func(axis int64) *graph.SoftmaxAttrs { return &graph.SoftmaxAttrs{Axis: axis} }
	layerNorm := func(axis int64) *graph.LayerNormAttrs {
		a := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
		a.Axis = axis
		return a
	}
	lp := func(p int64) *graph.LpNormAttrs { return &graph.LpNormAttrs{Axis: 1, P: p} }
	inst := graph.OpInstanceNormalization.NewAttrs().(*graph.EpsilonAttrs)
	bn := graph.OpBatchNormalization.NewAttrs().(*graph.BatchNormAttrs)
	conv := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.KernelShape, conv.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
	rows := func(c gcase) rcase { return rcase{gcase: c, strategy: "gpu-rows"} }
	return []rcase{
		rows(gcase{name: "softmax_last_static", op: graph.OpSoftmax, attrs: softmax(-1), args: []graph.Type{f32("3", "70", "33")}, binds: static}),
		rows(gcase{name: "softmax_last_symbolic", op: graph.OpSoftmax, attrs: softmax(-1), args: []graph.Type{f32("n", "9", "17")}, binds: syms}),
		rows(gcase{name: "softmax_middle_symbolic", op: graph.OpSoftmax, attrs: softmax(1), args: []graph.Type{f32("n", "6", "13")}, binds: syms}),
		// a symbolic row length may be long: a block per row (the rule's block-wide form)
		{gcase: gcase{name: "softmax_symbolic_row", op: graph.OpSoftmax, attrs: softmax(-1), args: []graph.Type{f32("n", "m")},
			binds: []map[string]int64{{"n": 1, "m": 1}, {"n": 65, "m": 3}, {"n": 130, "m": 300}}}, strategy: "gpu-rows-tree"},
		rows(gcase{name: "log_softmax_last_symbolic", op: graph.OpLogSoftmax, attrs: softmax(-1), args: []graph.Type{f32("n", "5", "21")}, binds: syms}),
		rows(gcase{name: "log_softmax_middle_static", op: graph.OpLogSoftmax, attrs: softmax(-2), args: []graph.Type{f32("4", "11", "25")}, binds: static}),
		{gcase: gcase{name: "hardmax_last_symbolic", op: graph.OpHardmax, attrs: softmax(-1), args: []graph.Type{f32("n", "m")},
			binds: []map[string]int64{{"n": 1, "m": 1}, {"n": 70, "m": 9}}}, strategy: "gpu-rows-tree"},
		rows(gcase{name: "hardmax_middle_symbolic", op: graph.OpHardmax, attrs: softmax(1), args: []graph.Type{f32("n", "7", "10")}, binds: syms}),
		rows(gcase{name: "softmax_mul_epilogue", op: graph.OpSoftmax, attrs: softmax(-1), args: []graph.Type{f32("n", "3", "12")},
			stages: []stage{{op: graph.OpMul, at: 0, args: []graph.Type{{}, f32("12")}}}, binds: syms}),
		rows(gcase{name: "layernorm_last_symbolic", op: graph.OpLayerNormalization, attrs: layerNorm(-1),
			args: []graph.Type{f32("n", "5", "24"), f32("24"), f32("24")}, binds: syms}),
		rows(gcase{name: "layernorm_last_two_symbolic", op: graph.OpLayerNormalization, attrs: layerNorm(-2),
			args: []graph.Type{f32("n", "6", "10"), f32("6", "10"), f32("10")}, binds: syms}),
		rows(gcase{name: "layernorm_static_no_bias", op: graph.OpLayerNormalization, attrs: layerNorm(-1),
			args: []graph.Type{f32("67", "19"), f32("19")}, binds: static}),
		rows(gcase{name: "instancenorm_symbolic", op: graph.OpInstanceNormalization, attrs: inst,
			args: []graph.Type{f32("n", "5", "6", "7"), f32("5"), f32("5")}, binds: syms}),
		rows(gcase{name: "lpnorm_p1_symbolic", op: graph.OpLpNormalization, attrs: lp(1), args: []graph.Type{f32("n", "8", "9")}, binds: syms}),
		rows(gcase{name: "lpnorm_p2_symbolic", op: graph.OpLpNormalization, attrs: lp(2), args: []graph.Type{f32("n", "8", "9")}, binds: syms}),
		// several stages whose output reads a reduction at every one of its axes: one
		// thread per output element (whichever rule takes them)
		{gcase: gcase{name: "global_average_pool_symbolic", op: graph.OpGlobalAveragePool, args: []graph.Type{f32("n", "5", "6", "7")}, binds: syms}},
		{gcase: gcase{name: "gemm_bias_symbolic", op: graph.OpGemm, attrs: graph.OpGemm.NewAttrs(),
			args: []graph.Type{f32("n", "40"), f32("40", "6"), f32("6")}, binds: syms}},
		{gcase: gcase{name: "conv_bias_symbolic", op: graph.OpConv, attrs: conv,
			args: []graph.Type{f32("n", "3", "9", "9"), f32("4", "3", "3", "3"), f32("4")}, binds: syms}},
		{gcase: gcase{name: "batchnorm_symbolic", op: graph.OpBatchNormalization, attrs: bn,
			args: []graph.Type{f32("n", "4", "5", "3"), f32("4"), f32("4"), f32("4"), f32("4")}, binds: syms},
			strategy: "gpu-injective", fix: nonNegative("x4")},
	}
}

// nonNegative makes the named input's values their absolute values.
func nonNegative(name string) func(in map[string]ref.Value) {
	return func(in map[string]ref.Value) {
		x := in[name].(*tensor.Tensor)
		v := x.Float64s()
		for i := range v {
			v[i] = math.Abs(v[i])
		}
		in[name] = tensor.FromFloat64s(x.DType, x.Shape, v)
	}
}

// runRow launches a row case's kernel at env on d and compares its output with the
// reference evaluator's.
func (c rcase) run(t *testing.T, l *lowered, d devices.Device, k devices.Kernel, env map[string]int64, seed uint64) {
	t.Helper()
	in := l.inputs(t, env, seed)
	if c.fix != nil {
		c.fix(in)
	}
	res, err := ref.Eval(l.m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	got, g, err := l.exec(t, d, k, env, in, want.Shape)
	if err != nil {
		t.Fatalf("%s at %v: launch %+v: %v", c.name, env, g, err)
	}
	nt.CloseTensor(t, fmt.Sprintf("%s at %v (grid %v, block %v)", c.name, env, g.Grid, g.Block), got, want)
}

// lowerRow lowers a row case and checks which strategy took it.
func lowerRow(t *testing.T, c rcase, tg target.Target) *lowered {
	t.Helper()
	l := lower(t, c.gcase, tg)
	if want := c.strategy; want == "" {
		return l
	} else if len(c.stages) > 0 {
		want += "+epilogue"
		if l.impl.Strategy != want {
			t.Fatalf("%s: lowered by %q, want %q", c.name, l.impl.Strategy, want)
		}
	} else if l.impl.Strategy != want {
		t.Fatalf("%s: lowered by %q, want %q", c.name, l.impl.Strategy, want)
	}
	return l
}

// TestRowKernelsMatchRefAsASerialLaunch runs every row case's launched kernel on the
// CPU, each block and thread in turn (serialLaunch), against the reference evaluator.
func TestRowKernelsMatchRefAsASerialLaunch(t *testing.T) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tg := testGPU(t)
	for _, c := range rowCases(t) {
		l := lowerRow(t, c, tg)
		src, err := codegen.EmitC(serialLaunch(l.f))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bin, err := d.Compiler().Build(context.Background(), src.Code)
		if errors.Is(err, devices.ErrUnavailable) {
			testdata.NoCompiler(t, err)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mod, k := loadKernel(t, d, bin, src.Kernels[0])
		for i, env := range c.binds {
			c.run(t, l, d, k, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRowKernelsCompileToPTX prints every row case in CUDA C and compiles it with NVRTC
// for sm_80.
func TestRowKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range rowCases(t) {
		l := lowerRow(t, c, tg)
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

// checkRows launches every row case on d at each binding of its symbols.
func checkRows(t *testing.T, d devices.Device, tg target.Target, load loader) {
	for _, c := range rowCases(t) {
		l := lowerRow(t, c, tg)
		mod, k := load(t, l, c.name)
		for i, env := range c.binds {
			c.run(t, l, d, k, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRowKernelsMatchRefOnOpenCL runs every row case, printed in OpenCL C, on the
// OpenCL device.
func TestRowKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkRows(t, d, openclTarget(t, d), openclLoader(d))
}

// TestRowKernelsMatchRefOnCUDA runs every row case on a CUDA GPU (skipped without one).
func TestRowKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkRows(t, d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestRowRuleRunsOneThreadPerRowWithItsStatisticsInLocalBuffers: a middle-axis softmax
// over n × 6 × 13 has n·13 rows, one per thread in blocks of 64, and each thread keeps
// its row's max and sum in one-element buffers of its own (n × 13 statistics each).
func TestRowRuleRunsOneThreadPerRowWithItsStatisticsInLocalBuffers(t *testing.T) {
	c := rowCases(t)[2] // softmax_middle_symbolic
	l := lowerRow(t, c, testGPU(t))
	if got, want := l.launch.String(), "grid((((n * 13) + 63) / 64), 1, 1) block(64, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	text := loopir.Print(l.impl.Func)
	thread := strings.Index(text, "bind(threadIdx.x)")
	for _, buf := range []string{"softmax_max", "softmax_sum"} {
		at := strings.Index(text, "alloc "+buf+": f32[1, 1] local")
		if at < 0 || thread < 0 || at < thread {
			t.Errorf("%s is not a one-element buffer under the thread loop:\n%s", buf, text)
		}
	}
	trace := l.impl.Trace.String()
	for _, want := range []string{"reorder(", "fuse(", "compute_at(", `"threadIdx.x"`} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %s:\n%s", want, trace)
		}
	}
	small := testGPU(t)
	small.GPU.MaxWorkGroup = 32
	if got, want := lowerRow(t, c, small).launch.String(), "grid((((n * 13) + 31) / 32), 1, 1) block(32, 1, 1)"; got != want {
		t.Errorf("capped at 32: launch %s, want %s", got, want)
	}
	few := rcase{gcase: gcase{name: "softmax_few_rows", op: graph.OpSoftmax, attrs: &graph.SoftmaxAttrs{Axis: -1},
		args: []graph.Type{ty(t, tensor.Float32, "3", "40")}}, strategy: "gpu-rows"}
	if got, want := lowerRow(t, few, testGPU(t)).launch.String(), "grid(1, 1, 1) block(3, 1, 1)"; got != want {
		t.Errorf("three rows: launch %s, want %s", got, want)
	}
}

// TestRowRuleRefusesOneGroupAndSeveralOutputs: a softmax over a vector (one group, no
// row axis) and a LayerNormalization that also returns its statistics are left to
// another strategy (none here).
func TestRowRuleRefusesOneGroupAndSeveralOutputs(t *testing.T) {
	st := gpu.Strategies(kernels.Default())
	b := graph.NewBuilder("main")
	x := b.Param("x", ty(t, tensor.Float32, "40"))
	outs, err := b.Node(graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: 0}, 1, x)
	if err != nil {
		t.Fatal(err)
	}
	in := []kernels.Input{{T: placeholder(t, x)}}
	if _, err := st.Lower(outs[0].Def, in, testGPU(t)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("softmax of a vector: err = %v, want ErrNoKernel", err)
	}
	y := b.Param("y", ty(t, tensor.Float32, "n", "8"))
	scale := b.Param("scale", ty(t, tensor.Float32, "8"))
	ln := graph.OpLayerNormalization.NewAttrs()
	outs, err = b.Node(graph.OpLayerNormalization, ln, 3, y, scale)
	if err != nil {
		t.Fatal(err)
	}
	in = []kernels.Input{{T: te.Placeholder("y", tensor.Float32, kernels.Syms{}.Shape(y.Type.Shape)...)},
		{T: te.Placeholder("scale", tensor.Float32, loopir.Int(8))}}
	if _, err := st.Lower(outs[0].Def, in, testGPU(t)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("layernorm with its statistics: err = %v, want ErrNoKernel", err)
	}
}
