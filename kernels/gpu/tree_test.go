package gpu_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// tcase is a case of the block-wide reductions: a row case (its strategy the rule's
// plain name) and whether its kernel reduces with a block's threads together (the
// rule's -tree strategy, all_reduce in its trace) on testGPU.
type tcase struct {
	rcase
	tree bool
}

// treeCases are softmax and LayerNormalization over rows of 1, 63, 64, 65, 768 and 1000
// elements, softmax and log-softmax over rows of a symbolic length, softmax over a middle
// axis and with a fused epilogue, instance and Lp normalization, LayerNormalization over
// a symbolic number of rows, Reduce ops to a scalar over 10⁵ elements (integer
// values, so that a float32 sum in any order is exact), over several axes and over a
// symbolic axis, GlobalAveragePool 1×512×7×7, ArgMax and ArgMin (the last index) over
// long axes with many ties, and Hardmax over long rows (the tree carries the index).
func treeCases(t testing.TB) []tcase {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	static := []map[string]int64{{}}
	softmax := &graph.SoftmaxAttrs{Axis: -1}
	ln := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
	ln.Axis = -1
	var cs []tcase
	for _, n := range []string{"1", "63", "64", "65", "768", "1000"} {
		long := n != "1" && n != "63"
		cs = append(cs,
			tcase{rcase{gcase: gcase{name: "softmax_rows_of_" + n, op: graph.OpSoftmax, attrs: softmax, args: []graph.Type{f32("3", n)}, binds: static}, strategy: "gpu-rows"}, long},
			tcase{rcase{gcase: gcase{name: "layernorm_rows_of_" + n, op: graph.OpLayerNormalization, attrs: ln,
				args: []graph.Type{f32("5", n), f32(n), f32(n)}, binds: static}, strategy: "gpu-rows"}, long})
	}
	symRows := []map[string]int64{{"n": 2, "m": 1}, {"n": 3, "m": 63}, {"n": 2, "m": 300}, {"n": 1, "m": 1000}}
	integers := func(in map[string]ref.Value) {
		for name, v := range in {
			x := v.(*tensor.Tensor)
			f := x.Float64s()
			for i := range f {
				f[i] = math.Round(f[i])
			}
			in[name] = tensor.FromFloat64s(x.DType, x.Shape, f)
		}
	}
	// integers with NaNs, several to a row: a NaN is ArgMax's and ArgMin's answer (the
	// first, or the last with select_last_index)
	nans := func(in map[string]ref.Value) {
		integers(in)
		for name, v := range in {
			x := v.(*tensor.Tensor)
			f := x.Float64s()
			for i := range f {
				if i%1237 == 5 || i%1237 == 400 {
					f[i] = math.NaN()
				}
			}
			in[name] = tensor.FromFloat64s(x.DType, x.Shape, f)
		}
	}
	reduce := func(name string, op graph.Op, keep int64, arg graph.Type, binds []map[string]int64, consts map[int]*tensor.Tensor) tcase {
		args := []graph.Type{arg}
		if consts != nil {
			args = append(args, graph.Type{})
		}
		return tcase{rcase{gcase: gcase{name: name, op: op, attrs: keepDims(keep), args: args, consts: consts, binds: binds}, strategy: "gpu-reduce", fix: integers}, true}
	}
	return append(cs,
		tcase{rcase{gcase: gcase{name: "softmax_symbolic_rows", op: graph.OpSoftmax, attrs: softmax, args: []graph.Type{f32("n", "m")}, binds: symRows}, strategy: "gpu-rows"}, true},
		tcase{rcase{gcase: gcase{name: "log_softmax_symbolic_rows", op: graph.OpLogSoftmax, attrs: softmax, args: []graph.Type{f32("n", "m")}, binds: symRows}, strategy: "gpu-rows"}, true},
		tcase{rcase{gcase: gcase{name: "softmax_middle_axis_of_100", op: graph.OpSoftmax, attrs: &graph.SoftmaxAttrs{Axis: 1}, args: []graph.Type{f32("n", "100", "3")},
			binds: []map[string]int64{{"n": 1}, {"n": 2}}}, strategy: "gpu-rows"}, true},
		tcase{rcase{gcase: gcase{name: "softmax_768_mul_epilogue", op: graph.OpSoftmax, attrs: softmax, args: []graph.Type{f32("n", "768")},
			stages: []stage{{op: graph.OpMul, at: 0, args: []graph.Type{{}, f32("768")}}}, binds: []map[string]int64{{"n": 2}}}, strategy: "gpu-rows"}, true},
		tcase{rcase{gcase: gcase{name: "instancenorm_16x16", op: graph.OpInstanceNormalization, attrs: graph.OpInstanceNormalization.NewAttrs(),
			args: []graph.Type{f32("1", "3", "16", "16"), f32("3"), f32("3")}, binds: static}, strategy: "gpu-rows"}, true},
		tcase{rcase{gcase: gcase{name: "lpnorm_p2_middle_axis_of_100", op: graph.OpLpNormalization, attrs: &graph.LpNormAttrs{Axis: 1, P: 2},
			args: []graph.Type{f32("2", "100", "3")}, binds: static}, strategy: "gpu-rows"}, true},
		// the definition of LayerNormalization needs a constant row length
		tcase{rcase{gcase: gcase{name: "layernorm_symbolic_row_count", op: graph.OpLayerNormalization, attrs: ln,
			args: []graph.Type{f32("n", "768"), f32("768"), f32("768")}, binds: []map[string]int64{{"n": 1}, {"n": 3}}}, strategy: "gpu-rows"}, true},
		reduce("reduce_sum_to_scalar", graph.OpReduceSum, 0, f32("100000"), static, nil),
		reduce("reduce_max_to_scalar", graph.OpReduceMax, 0, f32("100000"), static, nil),
		reduce("reduce_mean_to_scalar", graph.OpReduceMean, 0, f32("100000"), static, nil),
		reduce("reduce_min_two_axes_keep", graph.OpReduceMin, 1, f32("10", "9999"), static, nil),
		reduce("reduce_sum_int32", graph.OpReduceSum, 0, ty(t, tensor.Int32, "5000"), static, nil),
		reduce("reduce_sum_symbolic_axis", graph.OpReduceSum, 0, f32("3", "n"), []map[string]int64{{"n": 1}, {"n": 70}, {"n": 5000}}, axes(1)),
		tcase{rcase{gcase: gcase{name: "global_average_pool_512x7x7", op: graph.OpGlobalAveragePool, args: []graph.Type{f32("1", "512", "7", "7")}, binds: static}, strategy: "gpu-reduce"}, true},
		// integer values: many ties, which the tree breaks as the scan does
		tcase{rcase{gcase: gcase{name: "argmax_long_axis", op: graph.OpArgMax, attrs: &graph.ArgAttrs{Axis: 1}, args: []graph.Type{f32("2", "5000")}, binds: static}, strategy: "gpu-reduce", fix: integers}, true},
		tcase{rcase{gcase: gcase{name: "argmin_long_axis_last_index", op: graph.OpArgMin, attrs: &graph.ArgAttrs{Axis: 0, KeepDims: 1, SelectLastIndex: 1}, args: []graph.Type{f32("3000", "3")}, binds: static}, strategy: "gpu-reduce", fix: integers}, true},
		tcase{rcase{gcase: gcase{name: "argmax_int32_to_scalar", op: graph.OpArgMax, attrs: &graph.ArgAttrs{Axis: 0}, args: []graph.Type{ty(t, tensor.Int32, "n")},
			binds: []map[string]int64{{"n": 1}, {"n": 31}, {"n": 4000}}}, strategy: "gpu-reduce"}, true},
		tcase{rcase{gcase: gcase{name: "argmax_nan", op: graph.OpArgMax, attrs: &graph.ArgAttrs{Axis: 1}, args: []graph.Type{f32("3", "5000")}, binds: static}, strategy: "gpu-reduce", fix: nans}, true},
		tcase{rcase{gcase: gcase{name: "argmin_nan_last_index", op: graph.OpArgMin, attrs: &graph.ArgAttrs{Axis: 1, SelectLastIndex: 1}, args: []graph.Type{f32("3", "5000")}, binds: static}, strategy: "gpu-reduce", fix: nans}, true},
		// an arg-reduction and a stage reading it per row: the reduction rule's form
		tcase{rcase{gcase: gcase{name: "hardmax_rows_of_300", op: graph.OpHardmax, attrs: softmax, args: []graph.Type{f32("4", "300")}, binds: static}, strategy: "gpu-reduce", fix: integers}, true},
	)
}

// lowerTree lowers a tree case and checks its strategy (the case's, or its block-wide
// form, named with -tree) and whether its trace reduces with the block's threads.
func lowerTree(t *testing.T, c tcase, tg target.Target) *lowered {
	t.Helper()
	if c.tree {
		c.strategy += "-tree"
	}
	l := lowerRow(t, c.rcase, tg)
	if got := strings.Contains(l.impl.Trace.String(), "all_reduce("); got != c.tree {
		t.Fatalf("%s: all_reduce in the trace: %v, want %v\n%s", c.name, got, c.tree, l.impl.Trace)
	}
	return l
}

// TestTreeKernelsMatchRefInLockStep runs every tree case's launched kernel on the CPU,
// each block's threads in lock-step phases between its barriers, in order and in
// reverse order, against the reference.
func TestTreeKernelsMatchRefInLockStep(t *testing.T) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tg := testGPU(t)
	for _, c := range treeCases(t) {
		l := lowerTree(t, c, tg)
		for _, emulated := range []*loopir.PrimFunc{serialLaunch(l.f), threadsReversed(l.f)} {
			mod, k := buildEmulated(t, d, emulated)
			for i, env := range c.binds {
				c.run(t, l, d, k, env, uint64(i+1))
			}
			if err := mod.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLockStepEmulationCatchesAMissingBarrierOfTheTree: LayerNormalization over rows of
// 768 without any one of its barriers (after a statistic's partials, between two levels
// of its tree, before every thread reads the result) gives a wrong result in the
// lock-step emulation in one of the two orders of the threads.
func TestLockStepEmulationCatchesAMissingBarrierOfTheTree(t *testing.T) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var c tcase
	for _, x := range treeCases(t) {
		if x.name == "layernorm_rows_of_768" {
			c = x
		}
	}
	l := lowerTree(t, c, testGPU(t))
	in := l.inputs(t, nil, 1)
	res, err := ref.Eval(l.m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	n := strings.Count(loopir.Print(l.f), "barrier")
	if n != 18 {
		t.Fatalf("%d barriers, want 18 (per statistic: after the partials, after each of 8 levels)", n)
	}
	for drop := range n {
		broken := *l
		broken.f = withoutBarrier(l.f, drop)
		caught := false
		for _, emulated := range []*loopir.PrimFunc{serialLaunch(broken.f), threadsReversed(broken.f)} {
			mod, k := buildEmulated(t, d, emulated)
			got, _, err := broken.exec(t, d, k, nil, in, want.Shape)
			if err != nil {
				t.Fatal(err)
			}
			g, w := got.Float64s(), want.Float64s()
			for i := range w {
				caught = caught || math.Abs(g[i]-w[i]) > 1e-3*(1+math.Abs(w[i]))
			}
			if err := mod.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if !caught {
			t.Errorf("without barrier %d the emulated kernel still matches the reference", drop)
		}
	}
}

// TestTreeKernelsCompileToPTX prints every tree case in CUDA C and compiles it with
// NVRTC for sm_80.
func TestTreeKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range treeCases(t) {
		l := lowerTree(t, c, tg)
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

// checkTree launches every tree case on d at each binding of its symbols. The target is
// the device's with testGPU's compute units, so that the reduction rule makes the
// choices it makes for testGPU (a block per output element for few outputs).
func checkTree(t *testing.T, d devices.Device, tg target.Target, load loader) {
	tg.GPU.ComputeUnits = max(tg.GPU.ComputeUnits, testGPU(t).GPU.ComputeUnits)
	for _, c := range treeCases(t) {
		l := lowerTree(t, c, tg)
		mod, k := load(t, l, c.name)
		for i, env := range c.binds {
			c.run(t, l, d, k, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTreeKernelsMatchRefOnOpenCL runs every tree case, printed in OpenCL C, on the
// OpenCL device.
func TestTreeKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkTree(t, d, openclTarget(t, d), openclLoader(d))
}

// TestTreeKernelsMatchRefOnCUDA runs every tree case on a CUDA GPU (skipped without one).
func TestTreeKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkTree(t, d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestTreeRowsReduceEachStatisticWithTheBlocksThreads: LayerNormalization over 128 rows
// of 768 runs a block of 256 threads per row; both statistics are reduced by the block
// (a shared buffer of 256 each, barriers between the tree's levels), and the output's
// row is split among the threads.
func TestTreeRowsReduceEachStatisticWithTheBlocksThreads(t *testing.T) {
	ln := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
	ln.Axis = -1
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	c := tcase{rcase{gcase: gcase{name: "layernorm_128x768", op: graph.OpLayerNormalization, attrs: ln,
		args: []graph.Type{f32("128", "768"), f32("768"), f32("768")}}, strategy: "gpu-rows"}, true}
	l := lowerTree(t, c, testGPU(t))
	if got, want := l.launch.String(), "grid(128, 1, 1) block(256, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	if n := strings.Count(l.impl.Trace.String(), "all_reduce("); n != 2 {
		t.Errorf("%d all_reduce in the trace, want 2 (sum and sum of squares)\n%s", n, l.impl.Trace)
	}
	text := loopir.Print(l.f)
	for _, want := range []string{"alloc norm_sum_red: f32[256] shared", "alloc norm_sumsq_red: f32[256] shared", "barrier"} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, text)
		}
	}
	// a level of the tree reads what the level before wrote: a barrier between each two
	if n := strings.Count(text, "barrier"); n < 2*9 {
		t.Errorf("%d barriers, want at least 18 (the partials and 8 levels, twice):\n%s", n, text)
	}
}

// TestTreeReductionWritesEachOutputFromOneThread: a sum to a scalar runs one block whose
// thread 0 alone writes the result; GlobalAveragePool 1×512×7×7 runs a block of 32
// threads per output element (49 elements each).
func TestTreeReductionWritesEachOutputFromOneThread(t *testing.T) {
	for _, c := range treeCases(t) {
		var want string
		switch c.name {
		case "reduce_sum_to_scalar":
			want = "grid(1, 1, 1) block(256, 1, 1)"
		case "global_average_pool_512x7x7":
			want = "grid(512, 1, 1) block(32, 1, 1)"
		default:
			continue
		}
		l := lowerTree(t, c, testGPU(t))
		if got := l.launch.String(); got != want {
			t.Errorf("%s: launch %s, want %s", c.name, got, want)
		}
		text := loopir.Print(l.f)
		if !strings.Contains(text, "_unit == 0)") && !strings.Contains(text, "_unit < 1)") {
			t.Errorf("%s: the output is not written by thread 0 alone:\n%s", c.name, text)
		}
	}
}

// TestTreeRulesKeepOneThreadPerRowOrOutputOnAFullDevice: with rows or output elements
// enough for a block of one-thread-per-row (or per-output) threads on every compute
// unit, the rules keep that schedule; with fewer they take a block per row or output.
func TestTreeRulesKeepOneThreadPerRowOrOutputOnAFullDevice(t *testing.T) {
	ln := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
	ln.Axis = -1
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	layerNorm := rcase{gcase: gcase{name: "layernorm_128x768", op: graph.OpLayerNormalization, attrs: ln,
		args: []graph.Type{f32("128", "768"), f32("768"), f32("768")}}, strategy: "gpu-rows"}
	twoUnits := testGPU(t)
	twoUnits.GPU.ComputeUnits = 2 // 128 rows: a block of 64 on each
	for _, c := range []struct {
		tcase
		tg target.Target
	}{
		{tcase{layerNorm, true}, testGPU(t)},
		{tcase{layerNorm, false}, twoUnits},
		{tcase{rcase{gcase: gcase{name: "softmax_7000x100", op: graph.OpSoftmax, attrs: &graph.SoftmaxAttrs{Axis: -1},
			args: []graph.Type{f32("7000", "100")}}, strategy: "gpu-rows"}, false}, testGPU(t)},
		{tcase{rcase{gcase: gcase{name: "global_average_pool_64x512x7x7", op: graph.OpGlobalAveragePool,
			args: []graph.Type{f32("64", "512", "7", "7")}}, strategy: "gpu-reduce"}, false}, testGPU(t)},
		{tcase{rcase{gcase: gcase{name: "global_average_pool_8x512x7x7", op: graph.OpGlobalAveragePool,
			args: []graph.Type{f32("8", "512", "7", "7")}}, strategy: "gpu-reduce"}, true}, testGPU(t)},
	} {
		lowerTree(t, c.tcase, c.tg)
	}
}
