package compiler

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
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
