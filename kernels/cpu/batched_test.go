package cpu

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The batched matmul of two computed operands (attention's Q·Kᵀ and P·V) on the
// micro-kernel: rows and columns around the tile (0, 1, MR±1 rows; a partial column
// panel, one column past a tile and exactly one tile, with widths that hold on every ISA:
// the widest micro-kernel is 64 columns, and the strategy refuses fewer), K within one
// reduction block and beyond it, batch axes broadcast, with the attention scores'
// epilogue (scale, then an additive mask), symbolic and static at the last binding.

func wantBatched(t *testing.T, strategy string) {
	t.Helper()
	if !strings.HasPrefix(strategy, "matmul-batched-tensorized") {
		t.Errorf("strategy %s, want the batched matmul", strategy)
	}
}

func TestBatchedMatMul(t *testing.T) {
	f := tensor.Float32
	l := Strategies(kernels.Default())
	binds := []map[string]int64{{"b": 1, "s": 0}, {"b": 1, "s": 1}, {"b": 2, "s": 5}, {"b": 1, "s": 7}, {"b": 2, "s": 37}}
	for _, k := range []int{24, 300} {
		ks := strconv.Itoa(k)
		cases := [][]nt.SymArg{
			{nt.Sym(f, "b", "2", "s", ks), nt.Sym(f, "b", "2", ks, "68")}, // equal batch axes
			{nt.Sym(f, "b", "2", "s", ks), nt.Sym(f, "2", ks, "65")},      // B broadcast over b
			{nt.Sym(f, "s", ks), nt.Sym(f, "b", ks, "64")},                // A broadcast
		}
		for _, args := range cases {
			wantBatched(t, nt.CheckSymbolicFused(t, l, graph.OpMatMul, nil, args, nil, binds...))
		}
	}
}

func TestBatchedMatMulEpilogue(t *testing.T) {
	f := tensor.Float32
	l := Strategies(kernels.Default())
	binds := []map[string]int64{{"s": 1}, {"s": 7}, {"s": 19}, {"s": 40}}
	scale := nt.SymStage{Op: graph.OpDiv, Attrs: graph.OpDiv.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.SymC(f32(91, 1))}}
	mask := nt.SymStage{Op: graph.OpAdd, Attrs: graph.OpAdd.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.Sym(f, "1", "1", "1", "s")}}
	args := []nt.SymArg{nt.Sym(f, "1", "4", "s", "16"), nt.Sym(f, "1", "4", "16", "s")}
	wantBatched(t, nt.CheckSymbolicFused(t, l, graph.OpMatMul, nil, args, []nt.SymStage{scale, mask}, binds...))
}

// TestBatchedPanelMajor: a batched product whose B per batch element exceeds
// batchedPanelMajorBytes runs its column tiles outside its row tiles (consecutive
// units share one column panel of B), a small one the other way round; read from the
// schedule's trace, the reorder of the split row and column loops.
func TestBatchedPanelMajor(t *testing.T) {
	for _, tc := range []struct {
		k, n       int64
		panelFirst bool
	}{{1024, 512, true}, {64, 128, false}, {512, 512, false}} {
		a := te.Placeholder("a", tensor.Float32, kernels.Static(2, 12, tc.k)...)
		b := te.Placeholder("b", tensor.Float32, kernels.Static(2, tc.k, tc.n)...)
		m, err := kernels.MatMulReduction(a, b)
		if err != nil {
			t.Fatal(err)
		}
		f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{m})
		if err != nil {
			t.Fatal(err)
		}
		s := schedule.New(f)
		if err := ScheduleMatMulBatched(s, intrin.GemmFor(target.Host()), DefaultGemm); err != nil {
			t.Fatal(err)
		}
		var splits [][]string
		var order []string
		for _, in := range s.Trace().Insts {
			switch {
			case in.Op == "split":
				splits = append(splits, in.Out)
			case in.Op == "reorder" && order == nil:
				order = in.In
			}
		}
		if len(splits) < 2 || order == nil {
			t.Fatalf("K %d N %d: trace without the splits and reorder:\n%s", tc.k, tc.n, s.Trace())
		}
		rows, cols := slices.Index(order, splits[0][0]), slices.Index(order, splits[1][0])
		if rows < 0 || cols < 0 || (cols < rows) != tc.panelFirst {
			t.Errorf("K %d N %d: column tiles before row tiles = %v, want %v:\n%s", tc.k, tc.n, cols < rows, tc.panelFirst, s.Trace())
		}
	}
}
