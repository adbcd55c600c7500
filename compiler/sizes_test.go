package compiler

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// loadModule compiles m (with dims bound, or generic when dims is nil) and loads it.
func loadModule(t *testing.T, m *graph.Module, dims map[string]int64, limits vm.Limits) *vm.VM {
	t.Helper()
	dev := openCPU(t)
	exe, err := Compile(m, target.Host(), Options{Dims: dims, CPU: dev, Check: true, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.LoadWith(exe, []devices.Device{dev}, vm.StdBuiltins(), vm.Options{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Close() })
	return machine
}

// gatherModule is y = Gather(data, i) along axis 0 with a constant data of rows×cols
// (row r holds r·cols .. r·cols+cols-1) and indices of the given extent.
func gatherModule(t *testing.T, rows, cols int, n graph.Dim, elements bool) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	data := make([]float32, rows*cols)
	for k := range data {
		data[k] = float32(k)
	}
	d := b.Const("data", tensor.MustFromSlice(tensor.Shape{rows, cols}, data))
	op, attrs, ishape := graph.OpGather, &graph.GatherAttrs{}, []graph.Dim{n}
	if elements {
		op, ishape = graph.OpGatherElements, []graph.Dim{n, graph.Const(int64(cols))}
	}
	i := b.Param("i", graph.TensorType(tensor.Int64, ishape...))
	y, err := b.NodeNamed(op, "gather0", attrs, []string{"y"}, d, i)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rowIndices is Gather's indices (one per row: shape [count]) or GatherElements' (the
// row's index in every column: [count, cols]).
func rowIndices(rows []int64, cols int, elements bool) *tensor.Tensor {
	if !elements {
		return tensor.MustFromSlice(tensor.Shape{len(rows)}, rows)
	}
	v := make([]int64, 0, len(rows)*cols)
	for _, r := range rows {
		for range cols {
			v = append(v, r)
		}
	}
	return tensor.MustFromSlice(tensor.Shape{len(rows), cols}, v)
}

// TestCompiledGatherRefusesIndicesOutOfRange: on the compiled engine an index outside
// [-n, n) is an ErrInput error naming the node and the index (the kernel reports it),
// for static and symbolic index counts, for a small kernel and for one large enough to
// run in parallel chunks; negative indices in range count from the end.
func TestCompiledGatherRefusesIndicesOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, cols int
		n          graph.Dim
		dims       map[string]int64
		count      int
		elements   bool
	}{
		{"static", 3, 2, graph.Const(4), map[string]int64{}, 4, false},
		{"symbolic", 3, 2, graph.Sym("n"), nil, 4, false},
		{"parallel", 1000, 256, graph.Const(512), map[string]int64{}, 512, false},
		{"elements", 3, 2, graph.Const(5), map[string]int64{}, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gatherModule(t, tc.rows, tc.cols, tc.n, tc.elements)
			machine := loadModule(t, m, tc.dims, vm.Limits{})
			r := int64(tc.rows)
			rows := make([]int64, tc.count)
			for k := range rows {
				rows[k] = []int64{-1, 0, -r, r - 1, 1}[k%5]
			}
			out, err := machine.Run(context.Background(), []*tensor.Tensor{rowIndices(rows, tc.cols, tc.elements)})
			if err != nil {
				t.Fatal(err)
			}
			got := out[0].Float64s()
			for k, idx := range rows {
				idx = (idx + r) % r
				for j := range tc.cols {
					if g, want := got[k*tc.cols+j], float64(idx*int64(tc.cols)+int64(j)); g != want {
						t.Fatalf("output [%d, %d] is %v, want %v", k, j, g, want)
					}
				}
			}
			for _, bad := range []int64{r, -r - 1, 1 << 40, -1 << 62} {
				rows := make([]int64, tc.count)
				rows[len(rows)/2] = bad
				_, err := machine.Run(context.Background(), []*tensor.Tensor{rowIndices(rows, tc.cols, tc.elements)})
				if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), `"gather0"`) || !strings.Contains(err.Error(), "index "+strconv.FormatInt(bad, 10)) {
					t.Errorf("index %d: got %v, want an ErrInput naming gather0 and the index", bad, err)
				}
			}
		})
	}
}

// TestTensorOverTheLimitIsACompileError: a static tensor above the tensor limit
// (ConstantOfShape [2^20, 2^20] float32: 4 TiB) is a compile error naming the node,
// and so is one whose byte count overflows (a type made without inference, compiled
// without graph passes).
func TestTensorOverTheLimitIsACompileError(t *testing.T) {
	dev := openCPU(t)
	build := func(shape ...int64) (*graph.Module, *graph.Value) {
		b := graph.NewBuilder("main")
		x := b.Const("shape", tensor.MustFromSlice(tensor.Shape{len(shape)}, shape))
		y, err := b.NodeNamed(graph.OpConstantOfShape, "cos", nil, []string{"y"}, x)
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.Module(y...)
		if err != nil {
			t.Fatal(err)
		}
		return m, y[0]
	}
	m, _ := build(1<<20, 1<<20)
	_, err := Compile(m, target.Host(), Options{Dims: map[string]int64{}, CPU: dev})
	if !errors.Is(err, ErrCompile) || !errors.Is(err, vm.ErrMemoryLimit) || !strings.Contains(err.Error(), `ConstantOfShape "cos"`) {
		t.Errorf("4 TiB: got %v, want a compile error wrapping vm.ErrMemoryLimit naming the node", err)
	}
	m, y := build(1, 1)
	y.Type = graph.TensorType(tensor.Float32, graph.StaticShape(1<<31, 1<<31)...)
	_, err = Compile(m, target.Host(), Options{Dims: map[string]int64{}, CPU: dev, Passes: passes.Pipeline{}})
	if !errors.Is(err, ErrCompile) || !errors.Is(err, tensor.ErrTooLarge) || !strings.Contains(err.Error(), `ConstantOfShape "cos"`) {
		t.Errorf("2^64 bytes: got %v, want a compile error wrapping tensor.ErrTooLarge naming the node", err)
	}
}

// TestSymbolicPlanIsRefusedBeforeAnyKernelRuns: the generic executable checks the
// request's memory (mem.plan) once the symbols are bound: an n×n product over the
// request limit is refused, naming the node, before any kernel is launched (not only
// when its storage is allocated, after the Relu before it has run).
func TestSymbolicPlanIsRefusedBeforeAnyKernelRuns(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(1)))
	r, err := b.Op1(graph.OpRelu, nil, x) // a kernel that would run before the product's allocation
	if err != nil {
		t.Fatal(err)
	}
	x = r
	xt, err := b.Op1(graph.OpTranspose, &graph.TransposeAttrs{Perm: []int64{1, 0}}, x)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.NodeNamed(graph.OpMul, "outer", nil, []string{"y"}, x, xt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(r, y[0]) // r is a result: not fused into the product
	if err != nil {
		t.Fatal(err)
	}
	machine := loadModule(t, m, nil, vm.Limits{RequestBytes: 1 << 20})
	run := func(n int) (*vm.Profile, error) {
		var p vm.Profile
		_, err := machine.RunProfiled(context.Background(), []*tensor.Tensor{tensor.New(tensor.Float32, tensor.Shape{n, 1})}, &p)
		return &p, err
	}
	if _, err := run(100); err != nil { // 40 KB
		t.Fatal(err)
	}
	p, err := run(1000) // 4 MB
	if !errors.Is(err, vm.ErrInput) || !errors.Is(err, vm.ErrMemoryLimit) || !strings.Contains(err.Error(), `Mul "outer"`) {
		t.Fatalf("got %v, want ErrInput and ErrMemoryLimit naming the Mul", err)
	}
	for _, k := range p.Kernels {
		if k.Launches != 0 {
			t.Errorf("kernel %s ran %d times before the refusal", k.Name, k.Launches)
		}
	}
}

// TestLongBertRequestIsRefusedByTheLimit: bert_tiny's generic executable refuses a
// 8000-token request under a 1 GiB request limit before running it (its attention
// scores alone are 2·8000² floats per layer; the plan holds about 2.06 GB at its
// peak), and serves a 128-token one.
func TestLongBertRequestIsRefusedByTheLimit(t *testing.T) {
	m, err := onnx.Load(filepath.Join(testdata.Zoo(t), "bert_tiny", "model.onnx"), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	machine := loadModule(t, m, nil, vm.Limits{RequestBytes: 1 << 30})
	var p vm.Profile
	run := func(seq int) error {
		var in []*tensor.Tensor
		for range m.Main.Params {
			ids := make([]int64, seq)
			for i := range ids {
				ids[i] = 1
			}
			in = append(in, tensor.MustFromSlice(tensor.Shape{1, seq}, ids))
		}
		_, err := machine.RunProfiled(context.Background(), in, &p)
		return err
	}
	err = run(8000)
	if !errors.Is(err, vm.ErrInput) || !errors.Is(err, vm.ErrMemoryLimit) {
		t.Fatalf("seq 8000: got %v, want the request limit", err)
	}
	for _, k := range p.Kernels {
		if k.Launches != 0 {
			t.Errorf("kernel %s ran before the refusal", k.Name)
		}
	}
	if err := run(128); err != nil {
		t.Fatalf("seq 128: %v", err)
	}
}
