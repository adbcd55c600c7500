package cpu

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
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
