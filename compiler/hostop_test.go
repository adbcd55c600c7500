package compiler

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// dataDependentModule: every op whose output extents depend on data, each followed by a
// kernel that reads its result: NonZero, Compress with a run-time condition, TopK with a
// run-time k, NonMaxSuppression, Unique (four outputs) and MaxUnpool with a run-time
// output_shape.
func dataDependentModule(t *testing.T) *graph.Module {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[3,4], %cond: bool[4], %k: i64[1], %boxes: f32[1,5,4], %scores: f32[1,2,5], %maxout: i64[1], %iou: f32[1], %u: f32[7], %px: f32[1,1,2,2], %pi: i64[1,1,2,2], %os: i64[4]) {
  %nz = NonZero(%x) : i64[2,a]
  %nz2 = Add(%nz, %nz) : i64[2,a]
  %c = Compress(%x, %cond) {axis=1} : f32[3,b]
  %c2 = Exp(%c) : f32[3,b]
  %tv, %ti = TopK(%x, %k) {axis=1, largest=0} : f32[3,kk], i64[3,kk]
  %tv2 = Neg(%tv) : f32[3,kk]
  %sel = NonMaxSuppression(%boxes, %scores, %maxout, %iou) : i64[s,3]
  %uy, %ui, %uinv, %uc = Unique(%u) : f32[q], i64[q], i64[7], i64[q]
  %uy2 = Exp(%uy) : f32[q]
  %mu = MaxUnpool(%px, %pi, %os) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,h,w]
  %mu2 = Relu(%mu) : f32[1,1,h,w]
  return %nz2, %c2, %tv2, %ti, %sel, %uy2, %ui, %uinv, %uc, %mu2
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func f32s(shape tensor.Shape, v ...float32) *tensor.Tensor { return tensor.MustFromSlice(shape, v) }

// dataDependentRun is one request for dataDependentModule: x has zeros where zero is
// true, the condition keeps the columns in keep, TopK takes k.
func dataDependentRun(seed uint64, zeros []int, keep []bool, k int64, maxOut int64, u []float32, os []int64) []*tensor.Tensor {
	x := f32(seed, 3, 4)
	for _, z := range zeros {
		x.Data.([]float32)[z] = 0
	}
	boxes := f32s(tensor.Shape{1, 5, 4},
		0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9, 0, 10, 1, 11, 0, 10.1, 1, 11.1)
	scores := f32(seed+1, 1, 2, 5)
	return []*tensor.Tensor{x, tensor.MustFromSlice(tensor.Shape{4}, keep), i64s(k), boxes, scores,
		i64s(maxOut), f32s(tensor.Shape{1}, 0.5), tensor.MustFromSlice(tensor.Shape{7}, u),
		f32s(tensor.Shape{1, 1, 2, 2}, 1, 2, 3, 4), tensor.MustFromSlice(tensor.Shape{1, 1, 2, 2}, []int64{0, 3, 9, 15}),
		tensor.MustFromSlice(tensor.Shape{4}, os)}
}

// TestDataDependentOpsMatchReference: one executable of the host ops runs requests whose
// output extents differ (including empty outputs) and matches the reference each time,
// fused and not.
func TestDataDependentOpsMatchReference(t *testing.T) {
	runs := [][]*tensor.Tensor{
		dataDependentRun(1, []int{0, 5}, []bool{true, false, true, true}, 2, 3, []float32{2, 1, 1, 3, 4, 3, 2}, []int64{1, 1, 4, 4}),
		dataDependentRun(2, nil, []bool{false, false, false, false}, 0, 1, []float32{5, 5, 5, 5, 5, 5, 5}, []int64{1, 1, 5, 6}),
		dataDependentRun(3, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, []bool{true, true, true, true}, 4, 1<<40, []float32{-1, 0, 1, 2, 3, 4, 5}, []int64{1, 1, 4, 5}),
	}
	for _, noFusion := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[noFusion], func(t *testing.T) {
			checkSymbolic(t, dataDependentModule(t), target.Host(), Options{Recipe: engine.Recipe{NoFusion: noFusion}}, runs)
		})
	}
}

// TestDataDependentOpsRefuseHostileValues: values a request gets wrong are ErrInput
// errors naming the node and the fault, never a panic or a huge allocation.
func TestDataDependentOpsRefuseHostileValues(t *testing.T) {
	machine, _ := checkSymbolic(t, dataDependentModule(t), target.Host(), Options{}, nil)
	good := func() []*tensor.Tensor {
		return dataDependentRun(1, nil, []bool{true, true, true, true}, 2, 3, []float32{1, 2, 3, 4, 5, 6, 7}, []int64{1, 1, 4, 4})
	}
	if _, err := machine.Run(context.Background(), good()); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	for _, c := range []struct {
		why, want string
		edit      func(in []*tensor.Tensor)
	}{
		{"a negative k", "K=-1", func(in []*tensor.Tensor) { in[2] = i64s(-1) }},
		{"k above the axis", "K=5", func(in []*tensor.Tensor) { in[2] = i64s(5) }},
		{"a NaN box", "is NaN", func(in []*tensor.Tensor) { in[3].Data.([]float32)[6] = float32(math.NaN()) }},
		{"a NaN IoU threshold", "NaN", func(in []*tensor.Tensor) { in[6] = f32s(tensor.Shape{1}, float32(math.NaN())) }},
		{"an index past the unpooled shape", "out of range", func(in []*tensor.Tensor) { in[9].Data.([]int64)[3] = 16 }},
		{"a negative index", "out of range", func(in []*tensor.Tensor) { in[9].Data.([]int64)[0] = -1 }},
		{"an output_shape the indices fall outside", "falls outside", func(in []*tensor.Tensor) { in[10] = i64s(1, 1, 3, 3) }},
		{"an output_shape of other channels", "does not fit", func(in []*tensor.Tensor) { in[10] = i64s(1, 2, 4, 4) }},
		{"a huge output_shape", "memory limit", func(in []*tensor.Tensor) { in[10] = i64s(1, 1, 1<<30, 1<<30) }},
		{"a negative output_shape", "negative", func(in []*tensor.Tensor) { in[10] = i64s(1, 1, -4, 4) }},
	} {
		in := good()
		c.edit(in)
		_, err := machine.Run(context.Background(), in)
		if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrInput saying %q", c.why, err, c.want)
		}
	}
	// a huge max_output_boxes_per_class allocates no more than the boxes there are
	in := good()
	in[5] = i64s(math.MaxInt64)
	out, err := machine.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if rows := out[4].Shape[0]; rows > 10 {
		t.Fatalf("%d rows selected of 2 classes of 5 boxes", rows)
	}
}

// TestNonZeroFeedsGatherInsideLoop: a Loop whose body takes the non-zero positions of
// its carried vector and gathers them, so every iteration's extents come from the data
// of the one before; built in Go, compared with the reference.
func TestNonZeroFeedsGatherInsideLoop(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(8)))
	steps := b.Param("steps", graph.TensorType(tensor.Int64))
	sb := b.Sub("body")
	sb.Param("i", graph.TensorType(tensor.Int64))
	cond := sb.Param("c", graph.TensorType(tensor.Bool))
	h := sb.Param("h", graph.TensorType(tensor.Float32, graph.Const(8)))
	relu, _ := sb.Op1(graph.OpRelu, nil, h)
	nz, err := sb.Op1(graph.OpNonZero, nil, relu)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := sb.Op1(graph.OpReshape, nil, nz, sb.Const("flat", i64s(-1)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := sb.Op1(graph.OpGather, graph.OpGather.NewAttrs(), relu, flat)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := sb.Op1(graph.OpReduceSum, graph.OpReduceSum.NewAttrs(), g)
	next, _ := sb.Op1(graph.OpSub, nil, h, sum)
	la := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
	la.Body = sb.Return(cond, next)
	outs, err := b.Node(graph.OpLoop, la, 1, steps, b.Const("go", tensor.Scalar(true)), x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	dev := openCPU(t)
	for _, noFusion := range []bool{false, true} {
		res, err := Build(m, target.Host(), Options{CPU: dev, Check: true, Recipe: engine.Recipe{NoFusion: noFusion}})
		if err != nil {
			t.Fatal(err)
		}
		machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{0, 1, 3} {
			in := []*tensor.Tensor{f32(uint64(n)+7, 8), tensor.Scalar(n)}
			got, err := machine.Run(context.Background(), in)
			if err != nil {
				t.Fatalf("steps=%d: %v", n, err)
			}
			want, err := ref.Eval(m, map[string]ref.Value{"x": in[0], "steps": in[1]}, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			nodetest.CloseTensor(t, "loop result", got[0], want[0].(*tensor.Tensor))
		}
		machine.Close()
	}
}

// TestOpenCLTargetRunsHostOps: on OpenCL the host ops read their inputs from the
// device's kernels and feed kernels there (copies through host memory each way), and
// match the reference.
func TestOpenCLTargetRunsHostOps(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	_, res := checkSymbolic(t, dataDependentModule(t), tg, Options{GPU: gpu}, [][]*tensor.Tensor{
		dataDependentRun(1, []int{0, 5}, []bool{true, false, true, true}, 2, 3, []float32{2, 1, 1, 3, 4, 3, 2}, []int64{1, 1, 4, 4}),
		dataDependentRun(2, nil, []bool{false, false, false, false}, 0, 1, []float32{5, 5, 5, 5, 5, 5, 5}, []int64{1, 1, 5, 6}),
	})
	on := map[string]int{}
	for _, g := range res.Stats.Groups {
		on[g.Device]++
	}
	if on["opencl"] == 0 {
		t.Errorf("no kernel on the OpenCL device: %v", on)
	}
}

// TestHostOpTableNamesStandardHostOps: every op the compiler lowers to a host op names
// an entry of vm.StdHostOps (else every executable using it would fail to load).
func TestHostOpTableNamesStandardHostOps(t *testing.T) {
	std := vm.StdHostOps()
	n := 0
	for op, hl := range hostOpTable() {
		if hl.name == "" {
			continue
		}
		n++
		if _, ok := std[hl.name]; !ok {
			t.Errorf("%v lowers to host op %q, which vm.StdHostOps lacks", graph.Op(op), hl.name)
		}
	}
	if n == 0 {
		t.Fatal("the host op table is empty")
	}
}

// TestHostOpInsideIfBranch: a TopK with a run-time k in one branch of an If and a
// NonZero in the other, each reduced to a scalar; both branches match the reference.
func TestHostOpInsideIfBranch(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(8)))
	k := b.Param("k", graph.TensorType(tensor.Int64, graph.Const(1)))
	cond := b.Param("c", graph.TensorType(tensor.Bool))
	sum := func(fb *graph.Builder, v *graph.Value) *graph.Value {
		ra := graph.OpReduceSum.NewAttrs().(*graph.ReduceAttrs)
		ra.KeepDims = 0
		s, err := fb.Op1(graph.OpReduceSum, ra, v)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tb := b.Sub("then")
	top, err := tb.Node(graph.OpTopK, graph.OpTopK.NewAttrs(), 2, x, k)
	if err != nil {
		t.Fatal(err)
	}
	eb := b.Sub("else")
	nz, err := eb.Op1(graph.OpNonZero, nil, x)
	if err != nil {
		t.Fatal(err)
	}
	nzf, _ := eb.Op1(graph.OpCast, &graph.CastAttrs{To: int64(tensor.Float32), Saturate: 1}, nz)
	ia := graph.OpIf.NewAttrs().(*graph.IfAttrs)
	ia.ThenBranch, ia.ElseBranch = tb.Return(sum(tb, top[0])), eb.Return(sum(eb, nzf))
	res, err := b.Node(graph.OpIf, ia, 1, cond)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(res[0])
	if err != nil {
		t.Fatal(err)
	}
	xs := f32(5, 8)
	xs.Data.([]float32)[2], xs.Data.([]float32)[6] = 0, 0
	checkSymbolic(t, m, target.Host(), Options{}, [][]*tensor.Tensor{
		{xs, i64s(3), tensor.Scalar(true)},
		{xs, i64s(0), tensor.Scalar(true)},
		{xs, i64s(3), tensor.Scalar(false)},
	})
}

// TestHostOpsOnRandomDataMatchReference: integer data with many ties and duplicates
// (Unique along an axis, TopK of the largest, Compress without an axis, NonZero of a
// rank-3 tensor) and NonMaxSuppression with center-point boxes and a score threshold,
// against the reference for several seeds.
func TestHostOpsOnRandomDataMatchReference(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: i32[3,6,2], %k: i64[1], %cond: bool[9], %boxes: f32[2,6,4], %scores: f32[2,3,6], %maxout: i64[1], %iou: f32[1], %sth: f32[1]) {
  %uy, %ui, %uinv, %uc = Unique(%x) {axis=1} : i32[3,q,2], i64[q], i64[6], i64[q]
  %tv, %ti = TopK(%x, %k) {axis=1} : i32[3,kk,2], i64[3,kk,2]
  %c = Compress(%x, %cond) : i32[b]
  %nz = NonZero(%x) : i64[3,a]
  %sel = NonMaxSuppression(%boxes, %scores, %maxout, %iou, %sth) {center_point_box=1} : i64[s,3]
  return %uy, %ui, %uinv, %uc, %tv, %ti, %c, %nz, %sel
}`)
	if err != nil {
		t.Fatal(err)
	}
	var runs [][]*tensor.Tensor
	for seed := uint64(1); seed <= 6; seed++ {
		r := f32(seed, 36+9+48+36)
		v := r.Data.([]float32)
		xi := make([]int32, 36)
		for i := range xi {
			xi[i] = int32(v[i]*1.5) % 3 // few distinct values: duplicates and ties
		}
		if seed%2 == 0 { // equal columns along the Unique axis
			copy(xi[6:12], xi[0:6])
		}
		cond := make([]bool, 9)
		for i := range cond {
			cond[i] = v[36+i] > 0
		}
		boxes := tensor.MustFromSlice(tensor.Shape{2, 6, 4}, append([]float32{}, v[45:93]...))
		for i := range boxes.Data.([]float32) {
			if i%4 >= 2 { // widths and heights
				boxes.Data.([]float32)[i] = 1 + boxes.Data.([]float32)[i]*boxes.Data.([]float32)[i]
			}
		}
		runs = append(runs, []*tensor.Tensor{
			tensor.MustFromSlice(tensor.Shape{3, 6, 2}, xi), i64s(int64(seed % 7)),
			tensor.MustFromSlice(tensor.Shape{9}, cond), boxes,
			tensor.MustFromSlice(tensor.Shape{2, 3, 6}, append([]float32{}, v[93:129]...)),
			i64s(int64(seed)), f32s(tensor.Shape{1}, 0.3), f32s(tensor.Shape{1}, -0.5),
		})
	}
	checkSymbolic(t, m, target.Host(), Options{}, runs)
}
