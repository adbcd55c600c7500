package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// axes is a constant axes input (input 1 of the Reduce ops).
func axes(a ...int64) map[int]*tensor.Tensor {
	return map[int]*tensor.Tensor{1: tensor.MustFromSlice(tensor.Shape{len(a)}, a)}
}

func keepDims(k int64) *graph.ReduceAttrs { return &graph.ReduceAttrs{KeepDims: k} }

// convAttrs is a 2-D Conv's attributes: kernel k×k, pads p on every side, stride s,
// dilation d, group g.
func convAttrs(k, p, s, d, g int64) *graph.ConvAttrs {
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape, a.Pads, a.Strides, a.Dilations, a.Group = []int64{k, k}, []int64{p, p, p, p}, []int64{s, s}, []int64{d, d}, g
	return a
}

// poolAttrs is a 2-D pooling's attributes: kernel k×k, pads p on every side, stride s.
func poolAttrs(k, p, s, countPad int64) *graph.PoolAttrs {
	a := graph.OpMaxPool.NewAttrs().(*graph.PoolAttrs)
	a.KernelShape, a.Pads, a.Strides, a.CountIncludePad = []int64{k, k}, []int64{p, p, p, p}, []int64{s, s}, countPad
	return a
}

func gemmAttrs(transA, transB int64, alpha, beta float32) *graph.GemmAttrs {
	return &graph.GemmAttrs{TransA: transA, TransB: transB, Alpha: alpha, Beta: beta}
}

// reduceCases are reductions, arg-reductions, matmuls, convolutions and pooling, static
// and symbolic, with output element counts the block does not divide (tails).
func reduceCases(t testing.TB) []gcase {
	f := tensor.Float32
	syms := []map[string]int64{{"n": 1}, {"n": 7}, {"n": 70}}
	few := []map[string]int64{{"n": 1}, {"n": 3}}
	static := []map[string]int64{{}}
	x3 := func(a, b, c string) []graph.Type { return []graph.Type{ty(t, f, a, b, c), {}} }
	return []gcase{
		// Reduce*: inner, outer, middle and several axes, with and without keepdims
		{name: "reduce_sum_inner", op: graph.OpReduceSum, attrs: keepDims(0), args: x3("n", "5", "37"), consts: axes(-1), binds: syms},
		{name: "reduce_sum_outer_keep", op: graph.OpReduceSum, attrs: keepDims(1), args: x3("n", "5", "7"), consts: axes(0), binds: syms},
		{name: "reduce_mean_inner_keep", op: graph.OpReduceMean, attrs: keepDims(1), args: x3("n", "6", "19"), consts: axes(2), binds: syms},
		{name: "reduce_mean_outer", op: graph.OpReduceMean, attrs: keepDims(0), args: x3("n", "5", "7"), consts: axes(0), binds: syms},
		{name: "reduce_max_middle", op: graph.OpReduceMax, attrs: keepDims(1), args: x3("n", "13", "11"), consts: axes(1), binds: syms},
		{name: "reduce_min_two_axes", op: graph.OpReduceMin, attrs: keepDims(0), args: x3("n", "6", "9"), consts: axes(0, 2), binds: syms},
		{name: "reduce_prod_inner", op: graph.OpReduceProd, attrs: keepDims(1), args: x3("n", "9", "5"), consts: axes(2), binds: syms},
		{name: "reduce_l2_two_axes_keep", op: graph.OpReduceL2, attrs: keepDims(1), args: x3("n", "6", "9"), consts: axes(1, 2), binds: syms},
		{name: "reduce_sum_all", op: graph.OpReduceSum, attrs: keepDims(0), args: []graph.Type{ty(t, f, "3", "50", "7")}, binds: static},
		{name: "reduce_mean_all", op: graph.OpReduceMean, attrs: keepDims(0), args: []graph.Type{ty(t, f, "n", "4", "6")}, binds: syms},
		{name: "reduce_max_int64", op: graph.OpReduceMax, attrs: keepDims(0), args: []graph.Type{ty(t, tensor.Int64, "n", "9"), {}}, consts: axes(1), binds: syms},
		{name: "reduce_sum_int32", op: graph.OpReduceSum, attrs: keepDims(1), args: []graph.Type{ty(t, tensor.Int32, "4", "n"), {}}, consts: axes(0), binds: syms},
		{name: "reduce_mean_all_keep", op: graph.OpReduceMean, attrs: keepDims(1), args: []graph.Type{ty(t, f, "n", "4", "6")}, binds: syms},
		// ArgMax/ArgMin
		{name: "argmax_middle", op: graph.OpArgMax, attrs: &graph.ArgAttrs{Axis: 1, KeepDims: 1}, args: []graph.Type{ty(t, f, "n", "5", "7")}, binds: syms},
		{name: "argmin_inner", op: graph.OpArgMin, attrs: &graph.ArgAttrs{Axis: -1, KeepDims: 0}, args: []graph.Type{ty(t, f, "n", "3", "29")}, binds: syms},
		{name: "argmax_last_index", op: graph.OpArgMax, attrs: &graph.ArgAttrs{Axis: 0, KeepDims: 0, SelectLastIndex: 1}, args: []graph.Type{ty(t, tensor.Int32, "6", "n")}, binds: syms},
		// MatMul and Gemm
		{name: "matmul_2d", op: graph.OpMatMul, args: []graph.Type{ty(t, f, "n", "37"), ty(t, f, "37", "9")}, binds: syms},
		{name: "matmul_batched", op: graph.OpMatMul, args: []graph.Type{ty(t, f, "n", "5", "40"), ty(t, f, "n", "40", "3")}, binds: syms},
		{name: "matmul_broadcast_batch", op: graph.OpMatMul, args: []graph.Type{ty(t, f, "n", "1", "3", "37"), ty(t, f, "2", "37", "5")}, binds: syms},
		{name: "gemm_bias", op: graph.OpGemm, attrs: gemmAttrs(0, 0, 1, 1), args: []graph.Type{ty(t, f, "n", "37"), ty(t, f, "37", "11"), ty(t, f, "11")}, binds: syms},
		{name: "gemm_trans_a_b", op: graph.OpGemm, attrs: gemmAttrs(1, 1, 0.5, 2), args: []graph.Type{ty(t, f, "37", "n"), ty(t, f, "7", "37"), ty(t, f, "n", "1")}, binds: syms},
		// Conv
		{name: "conv3x3_pad1_bias", op: graph.OpConv, attrs: convAttrs(3, 1, 1, 1, 1),
			args: []graph.Type{ty(t, f, "n", "3", "9", "9"), ty(t, f, "4", "3", "3", "3"), ty(t, f, "4")}, binds: few},
		{name: "conv3x3_pad1_stride2", op: graph.OpConv, attrs: convAttrs(3, 1, 2, 1, 1),
			args: []graph.Type{ty(t, f, "n", "5", "11", "11"), ty(t, f, "6", "5", "3", "3")}, binds: few},
		{name: "conv1x1", op: graph.OpConv, attrs: convAttrs(1, 0, 1, 1, 1),
			args: []graph.Type{ty(t, f, "n", "19", "5", "7"), ty(t, f, "10", "19", "1", "1"), ty(t, f, "10")}, binds: syms},
		{name: "conv_depthwise5x5", op: graph.OpConv, attrs: convAttrs(5, 2, 1, 1, 8),
			args: []graph.Type{ty(t, f, "n", "8", "7", "7"), ty(t, f, "8", "1", "5", "5"), ty(t, f, "8")}, binds: few},
		{name: "conv_grouped", op: graph.OpConv, attrs: convAttrs(3, 0, 1, 1, 2),
			args: []graph.Type{ty(t, f, "n", "6", "8", "8"), ty(t, f, "4", "3", "3", "3")}, binds: few},
		{name: "conv_dilated", op: graph.OpConv, attrs: convAttrs(3, 2, 1, 2, 1),
			args: []graph.Type{ty(t, f, "n", "2", "10", "10"), ty(t, f, "3", "2", "3", "3"), ty(t, f, "3")}, binds: few},
		{name: "conv_add_relu", op: graph.OpConv, attrs: convAttrs(3, 1, 1, 1, 1),
			args:   []graph.Type{ty(t, f, "n", "3", "9", "9"), ty(t, f, "4", "3", "3", "3"), ty(t, f, "4")},
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, ty(t, f, "n", "4", "9", "9")}}, {op: graph.OpRelu, at: 0, args: []graph.Type{{}}}},
			binds:  few},
		// pooling (the window needs static extents)
		{name: "maxpool3x3_pad1_stride2", op: graph.OpMaxPool, attrs: poolAttrs(3, 1, 2, 0), args: []graph.Type{ty(t, f, "2", "3", "11", "11")}, binds: static},
		{name: "averagepool_pad_exclude", op: graph.OpAveragePool, attrs: poolAttrs(3, 1, 2, 0), args: []graph.Type{ty(t, f, "3", "3", "10", "10")}, binds: static},
		{name: "averagepool_pad_include", op: graph.OpAveragePool, attrs: poolAttrs(2, 1, 1, 1), args: []graph.Type{ty(t, f, "1", "2", "7", "7")}, binds: static},
		{name: "lppool_p2", op: graph.OpLpPool, attrs: poolAttrs(2, 0, 2, 0), args: []graph.Type{ty(t, f, "2", "3", "9", "8")}, binds: static},
		{name: "global_maxpool", op: graph.OpGlobalMaxPool, args: []graph.Type{ty(t, f, "n", "5", "3", "11")}, binds: syms},
		{name: "global_averagepool", op: graph.OpGlobalAveragePool, args: []graph.Type{ty(t, f, "n", "19", "7", "7")}, binds: syms},
	}
}

func TestReduceKernelsMatchRefAsASerialLaunch(t *testing.T) {
	emulateCases(t, reduceCases(t))
}

// TestReduceKernelsMatchRefOnOpenCL runs every reduction case, printed in OpenCL C and
// built by the driver, on the OpenCL device.
func TestReduceKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkCases(t, reduceCases(t), d, openclTarget(t, d), openclLoader(d))
}

// TestReduceKernelsMatchRefOnCUDA runs every reduction case on a CUDA GPU (skipped
// without one).
func TestReduceKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkCases(t, reduceCases(t), d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestReduceKernelsCompileToPTX lowers every reduction case, prints it in CUDA C and
// compiles it with NVRTC for sm_80.
func TestReduceKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range reduceCases(t) {
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

// TestReduceCasesTakeTheReductionRule: every reduction case is lowered by gpu-reduce,
// or gpu-reduce-tree for few output elements of a long reduction (a case the injective
// rule took would test nothing here), but float32 MatMul and Gemm, whose own rule
// gpu-matmul-tiled comes first, and float32 2-D convolutions of one group, whose own
// rule gpu-conv-gemm comes first (grouped and depthwise ones stay here).
func TestReduceCasesTakeTheReductionRule(t *testing.T) {
	tree := map[string]bool{"reduce_sum_outer_keep": true, "reduce_mean_outer": true, "reduce_min_two_axes": true,
		"reduce_sum_all": true, "reduce_mean_all": true, "reduce_mean_all_keep": true}
	for _, c := range reduceCases(t) {
		l := lower(t, c, testGPU(t))
		want := "gpu-reduce"
		if c.op == graph.OpMatMul || c.op == graph.OpGemm {
			want = "gpu-matmul-tiled"
		} else if tree[c.name] {
			want = "gpu-reduce-tree"
		}
		if len(c.stages) > 0 {
			want += "+epilogue"
		}
		if l.impl.Strategy != want {
			t.Errorf("%s: strategy %q, want %q", c.name, l.impl.Strategy, want)
		}
	}
}

func TestReduceRuleRunsOneThreadPerOutputElement(t *testing.T) {
	l := lower(t, reduceCase(t, "reduce_sum_inner"), testGPU(t)) // n × 5 × 37 → n × 5
	if got, want := l.launch.String(), "grid((((n * 5) + 255) / 256), 1, 1) block(256, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	trace := l.impl.Trace.String()
	for _, want := range []string{`fuse(`, `"blockIdx.x"`, `"threadIdx.x"`, `decompose_reduction(`} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %s:\n%s", want, trace)
		}
	}
	// a mean's division runs in the thread that has just summed its element, which
	// keeps the sum in a private element
	l = lower(t, reduceCase(t, "reduce_mean_inner_keep"), testGPU(t)) // n × 6 × 19 → n × 6 × 1
	if trace := l.impl.Trace.String(); !strings.Contains(trace, "reverse_compute_at(") {
		t.Errorf("the trace lacks reverse_compute_at:\n%s", trace)
	}
	if text := loopir.Print(l.f); !strings.Contains(text, "alloc reduce_sum: f32[1, 1, 1] local") {
		t.Errorf("the sum is not one private element:\n%s", text)
	}
}

func reduceCase(t testing.TB, name string) gcase {
	for _, c := range reduceCases(t) {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return gcase{}
}

func TestReduceRuleMovesReductionLoopsInsideSpatialLoops(t *testing.T) {
	n := loopir.NewVar("n")
	x := te.Placeholder("x", tensor.Float32, n, loopir.Int(7))
	k := te.RAxis("k", loopir.Int(7))
	y := te.Compute("y", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr { return te.Sum(x.At(i[0], k.Var), k) })
	f, err := te.Lower("rowsum", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(f)
	b, err := s.GetBlock("y")
	if err != nil {
		t.Fatal(err)
	}
	loops, err := s.GetLoops(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reorder(loops[1], loops[0]); err != nil { // k outside i
		t.Fatal(err)
	}
	if err := gpu.ScheduleReduce(s, 64); err != nil {
		t.Fatal(err)
	}
	if trace := s.Trace().String(); !strings.Contains(trace, "bind(") || strings.Count(trace, "reorder(") != 2 {
		t.Errorf("want the reduction reordered back inside and the rows bound:\n%s", trace)
	}
	low, err := passes.GPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := passes.DeriveLaunch(low); err != nil {
		t.Fatal(err)
	}
}

func TestReduceRuleRefusesSeveralReductionStagesAndSeveralOutputs(t *testing.T) {
	st := gpu.Strategies(kernels.Default())
	b := graph.NewBuilder("main")
	x := b.Param("x", ty(t, tensor.Float32, "2", "3", "6", "6"))
	in := []kernels.Input{{T: placeholder(t, x)}}
	// LogSumExp: a max, then a sum of exponentials shifted by it
	lse, err := b.Node(graph.OpReduceLogSumExp, keepDims(1), 1, x)
	if err != nil {
		t.Fatal(err)
	}
	// the reduction rule refuses it; the rows rule (one thread per row) may take it
	if impl, err := st.Lower(lse[0].Def, in, testGPU(t)); err == nil && strings.HasPrefix(impl.Strategy, "gpu-reduce") {
		t.Errorf("ReduceLogSumExp: taken by %s, a rule for one reduction stage", impl.Strategy)
	} else if err != nil && !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("ReduceLogSumExp: err = %v, want a kernel or ErrNoKernel", err)
	}
	pool, err := b.Node(graph.OpMaxPool, poolAttrs(2, 0, 2, 0), 2, x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lower(pool[0].Def, in, testGPU(t)); !errors.Is(err, kernels.ErrNoKernel) {
		t.Errorf("MaxPool with Indices: err = %v, want ErrNoKernel", err)
	}
}
