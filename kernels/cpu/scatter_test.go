package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// Scatter and GatherND kernels against the reference evaluator: random data, duplicate
// and negative indices, every reduction; and hostile indices (scatter_guard_test.go).

// randIndices is an int64 tensor of the shape with values in [-n, n) (negative ones
// count from the end), drawn with repeats.
func randIndices(seed uint64, n int64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]int64, tensor.Shape(shape).NumElements())
	for i := range v {
		v[i] = r.Int64N(2*n) - n
	}
	return tensor.MustFromSlice(tensor.Shape(shape), v)
}

func scatterElementsAttrs(axis int64, red string) *graph.ScatterElementsAttrs {
	a := graph.OpScatterElements.NewAttrs().(*graph.ScatterElementsAttrs)
	a.Axis, a.Reduction = axis, red
	return a
}

func scatterNDAttrs(red string) *graph.ScatterNDAttrs {
	a := graph.OpScatterND.NewAttrs().(*graph.ScatterNDAttrs)
	a.Reduction = red
	return a
}

var scatterReductions = []string{"none", "add", "mul", "max", "min"}

// TestScatterElementsMatchesReference: every axis (negative too), random indices with
// repeats and negative values, each reduction, float and integer data; with
// duplicates and reduction none the last update wins.
func TestScatterElementsMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	data := f32(31, 4, 5, 6)
	for _, axis := range []int64{0, 1, 2, -1} {
		ax := (axis + 3) % 3
		ishape := []int{3, 4, 2}
		ishape[ax] = 7 // more updates along the axis than it has elements: repeats
		ind := randIndices(uint64(40+axis), []int64{4, 5, 6}[ax], ishape...)
		upd := f32(uint64(50+axis), ishape...)
		for _, red := range scatterReductions {
			if s := nt.CheckNode(t, l, graph.OpScatterElements, scatterElementsAttrs(axis, red), 1, nt.In(data), nt.In(ind), nt.In(upd)); s != "scatter-loops" {
				t.Fatalf("axis %d %s: strategy %s", axis, red, s)
			}
		}
	}
	// int32 data and int32 indices, all updates on one element: the order is visible
	di := iota64(3, 4)
	d32 := tensor.MustFromSlice(tensor.Shape{3, 4}, []int32{5, -2, 7, 1, 0, 3, 9, -4, 2, 2, 8, 6})
	same := tensor.MustFromSlice(tensor.Shape{3, 2}, []int32{1, -3, 1, 1, -3, 1})
	u32 := tensor.MustFromSlice(tensor.Shape{3, 2}, []int32{4, -1, 6, 3, 2, -7})
	for _, red := range scatterReductions {
		nt.CheckNode(t, l, graph.OpScatterElements, scatterElementsAttrs(1, red), 1, nt.In(d32), nt.In(same), nt.In(u32))
		nt.CheckNode(t, l, graph.OpScatterElements, scatterElementsAttrs(0, red), 1, nt.In(di), nt.In(randIndices(61, 3, 2, 4)), nt.In(iota64(2, 4)))
	}
	// NaN in the data or in an update wins a max or a min, as in the reference
	nan := math.NaN()
	dn := tensor.FromFloat64s(tensor.Float32, tensor.Shape{2, 3}, []float64{nan, 1, 2, 3, nan, 5})
	un := tensor.FromFloat64s(tensor.Float32, tensor.Shape{2, 3}, []float64{4, nan, -1, nan, 0, 9})
	for _, red := range []string{"max", "min"} {
		nt.CheckNode(t, l, graph.OpScatterElements, scatterElementsAttrs(0, red), 1, nt.In(dn), nt.In(i64s([]int{2, 3}, 0, 0, 0, 1, 1, 1)), nt.In(un))
	}
	// booleans, and constant indices
	bools := tensor.MustFromSlice(tensor.Shape{2, 3}, []bool{true, false, true, false, false, true})
	nt.CheckNode(t, l, graph.OpScatterElements, scatterElementsAttrs(1, "none"), 1,
		nt.In(bools), nt.C(i64s([]int{2, 2}, 2, 0, -1, 1)), nt.In(tensor.MustFromSlice(tensor.Shape{2, 2}, []bool{false, true, false, true})))
}

// TestScatterNDMatchesReference: index tuples addressing elements, rows and the whole
// tensor, with repeats, negative values and each reduction.
func TestScatterNDMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	data := f32(71, 4, 5, 3)
	cases := []struct {
		ind   *tensor.Tensor
		shape []int // updates
	}{
		{randIndices(72, 4, 6, 1), []int{6, 5, 3}},              // rows of the first axis
		{tupleIndices(73, []int64{4, 5}, 3, 2), []int{3, 2, 3}}, // rows of the last axis
		{tupleIndices(74, []int64{4, 5, 3}, 9), []int{9}},       // single elements, repeats
		{i64s([]int{2, 0}), []int{2, 4, 5, 3}},                  // the whole tensor, twice
	}
	for i, c := range cases {
		upd := f32(uint64(80+i), c.shape...)
		for _, red := range scatterReductions {
			if s := nt.CheckNode(t, l, graph.OpScatterND, scatterNDAttrs(red), 1, nt.In(data), nt.In(c.ind), nt.In(upd)); s != "scatter-loops" {
				t.Fatalf("case %d %s: strategy %s", i, red, s)
			}
		}
	}
	// int64 data: exact
	nt.CheckNode(t, l, graph.OpScatterND, scatterNDAttrs("add"), 1,
		nt.In(iota64(6, 2)), nt.In(i64s([]int{3, 1}, 1, -1, 1)), nt.In(iota64(3, 2)))
}

// tupleIndices is [shape..., len(ext)] int64 index tuples, coordinate m in
// [-ext[m], ext[m]).
func tupleIndices(seed uint64, ext []int64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 9))
	full := append(append(tensor.Shape{}, shape...), len(ext))
	v := make([]int64, full.NumElements())
	for i := range v {
		n := ext[i%len(ext)]
		v[i] = r.Int64N(2*n) - n
	}
	return tensor.MustFromSlice(full, v)
}

// TestScatterIsLinearInTheUpdates: a scatter of 1000 updates into a million-element
// tensor is a copy and then one pass over the updates; its loop nest holds no loop
// over the output inside the loop over the updates.
func TestScatterIsLinearInTheUpdates(t *testing.T) {
	l := Strategies(kernels.Default())
	m, _ := nt.Build(t, graph.OpScatterND, scatterNDAttrs("add"), 1,
		nt.In(tensor.New(tensor.Float32, tensor.Shape{1000, 1000})), nt.In(tensor.New(tensor.Int64, tensor.Shape{1000, 2})), nt.In(tensor.New(tensor.Float32, tensor.Shape{1000})))
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	in, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := l.Lower(n, in, hostTarget())
	if err != nil {
		t.Fatal(err)
	}
	if w := loopWork(impl.Func.Body); w > 1000*1000+1000 {
		t.Errorf("the scatter runs %d loop iterations, want at most %d", w, 1000*1000+1000)
	}
}

// TestScatterRefusesWhatItCannotShowInBounds: indices wider than the data along an axis
// they do not index, updates that do not follow the indices, and reductions on
// booleans are ErrNoKernel, never a kernel.
func TestScatterRefusesWhatItCannotShowInBounds(t *testing.T) {
	l := Strategies(kernels.Default())
	data := f32(91, 3, 4)
	cases := map[string]error{
		"indices wider than the data": nt.LowerErr(t, l, graph.OpScatterElements, scatterElementsAttrs(0, "none"), 1,
			nt.In(data), nt.In(randIndices(92, 3, 2, 6)), nt.In(f32(93, 2, 6))),
		"reduction on booleans": nt.LowerErr(t, l, graph.OpScatterElements, scatterElementsAttrs(0, "add"), 1,
			nt.In(tensor.New(tensor.Bool, tensor.Shape{3})), nt.In(vec(0)), nt.In(tensor.New(tensor.Bool, tensor.Shape{1}))),
	}
	for what, err := range cases {
		if !errors.Is(err, kernels.ErrNoKernel) {
			t.Errorf("%s: got %v, want ErrNoKernel", what, err)
		}
	}
}

func gatherNDAttrs(b int64) *graph.GatherNDAttrs {
	a := graph.OpGatherND.NewAttrs().(*graph.GatherNDAttrs)
	a.BatchDims = b
	return a
}

// TestGatherNDMatchesReference: tuples addressing elements, rows and slices, negative
// indices, batch_dims 0, 1 and 2.
func TestGatherNDMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	data := f32(101, 4, 5, 3)
	for i, ind := range []*tensor.Tensor{
		tupleIndices(102, []int64{4}, 7),
		tupleIndices(103, []int64{4, 5}, 2, 3),
		tupleIndices(104, []int64{4, 5, 3}, 6),
		i64s([]int{2, 0}), // whole tensors
	} {
		if s := nt.CheckNode(t, l, graph.OpGatherND, gatherNDAttrs(0), 1, nt.In(data), nt.In(ind)); s != "generic" {
			t.Fatalf("case %d: strategy %s", i, s)
		}
	}
	nt.CheckNode(t, l, graph.OpGatherND, gatherNDAttrs(1), 1, nt.In(data), nt.In(tupleIndices(105, []int64{5}, 4, 2)))
	nt.CheckNode(t, l, graph.OpGatherND, gatherNDAttrs(1), 1, nt.In(data), nt.In(tupleIndices(106, []int64{5, 3}, 4, 1)))
	nt.CheckNode(t, l, graph.OpGatherND, gatherNDAttrs(2), 1, nt.In(data), nt.In(tupleIndices(107, []int64{3}, 4, 5, 2)))
	nt.CheckNode(t, l, graph.OpGatherND, gatherNDAttrs(0), 1, nt.In(iota64(3, 4)),
		nt.In(tensor.MustFromSlice(tensor.Shape{2, 2}, []int32{-1, 3, 0, -4})))
}

func hostTarget() target.Target { return target.Host() }

// loopWork counts the stores a loop nest with constant extents executes (a branch
// counted as its larger arm).
func loopWork(s loopir.Stmt) int64 {
	switch s := s.(type) {
	case *loopir.For:
		c, ok := s.Extent.(*loopir.IntImm)
		if !ok {
			panic("BUG: loopWork on a symbolic extent")
		}
		return c.V * loopWork(s.Body)
	case loopir.Seq:
		var w int64
		for _, x := range s {
			w += loopWork(x)
		}
		return w
	case *loopir.IfThenElse:
		return max(loopWork(s.Then), loopWork(s.Else))
	case *loopir.Allocate:
		return loopWork(s.Body)
	case *loopir.Block:
		return loopWork(s.Init) + loopWork(s.Body)
	case *loopir.Store:
		return 1
	}
	return 0
}

// TestScatterGatherNDAndTopKOverSymbolicExtents: one kernel per node with the batch and
// sequence extents as run-time dims, run at several values of them (empty ones among
// them where the indices allow) against the reference evaluator.
func TestScatterGatherNDAndTopKOverSymbolicExtents(t *testing.T) {
	f := tensor.Float32
	t.Run("ScatterElements along a static axis", func(t *testing.T) {
		for _, red := range []string{"none", "add"} {
			checkSym(t, graph.OpScatterElements, scatterElementsAttrs(2, red), 1, nt.Sym(f, "b", "s", "6"), indices("6", "b", "s", "3"), nt.Sym(f, "b", "s", "3"))
		}
	})
	t.Run("ScatterElements along a symbolic axis", func(t *testing.T) {
		checkSymAt(t, nonEmpty, graph.OpScatterElements, scatterElementsAttrs(1, "max"), 1, nt.Sym(f, "b", "s", "4"), indices("s", "b", "5", "4"), nt.Sym(f, "b", "5", "4"))
	})
	t.Run("ScatterND", func(t *testing.T) {
		checkSymAt(t, nonEmpty, graph.OpScatterND, scatterNDAttrs("none"), 1, nt.Sym(f, "b", "5", "3"), indices("b", "s", "1"), nt.Sym(f, "s", "5", "3"))
		checkSym(t, graph.OpScatterND, scatterNDAttrs("mul"), 1, nt.Sym(f, "3", "b", "s"), indices("3", "4", "1"), nt.Sym(f, "4", "b", "s"))
	})
	t.Run("GatherND", func(t *testing.T) {
		checkSymAt(t, nonEmpty, graph.OpGatherND, gatherNDAttrs(1), 1, nt.Sym(f, "b", "s", "4"), indices("s", "b", "3", "1"))
		checkSym(t, graph.OpGatherND, gatherNDAttrs(0), 1, nt.Sym(f, "5", "b", "s"), indices("5", "s", "1"))
	})
	t.Run("TopK", func(t *testing.T) {
		checkSym(t, graph.OpTopK, topKAttrs(1, true, true), 2, nt.Sym(f, "b", "9", "s"), nt.SymC(vec(4)))
		checkSym(t, graph.OpTopK, topKAttrs(-1, false, true), 2, nt.Sym(f, "s", "b", "7"), nt.SymC(vec(7)))
	})
}
