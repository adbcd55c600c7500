package cpu

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// The packed matmul over symbolic rows (a transformer's projections: A [batch, seq, K]
// times constant weights): row tiles of the micro-kernel's height, the last one partial
// at run time, at every row count around the tile (0, 1, MR-1, MR, MR+1) and beyond,
// with and without epilogues, and static at the last binding.

// rowBinds binds b·s to 0, 1, MR-1, MR, MR+1, 37, 128 rows (and 2·19 = 38).
func rowBinds() []map[string]int64 {
	mr := intrin.GemmFor(target.Host()).MR
	var out []map[string]int64
	for _, rows := range []int64{0, 1, mr - 1, mr, mr + 1, 37, 128} {
		out = append(out, map[string]int64{"b": 1, "s": rows})
	}
	return append(out, map[string]int64{"b": 2, "s": 19})
}

func wantPacked(t *testing.T, strategy string) {
	t.Helper()
	if !strings.HasPrefix(strategy, "matmul-packed-tensorized") && !strings.HasPrefix(strategy, "gemm-packed-tensorized") {
		t.Errorf("strategy %s, want the packed matmul", strategy)
	}
}

// TestSymbolicPackedMatMul: K within one reduction block (the zero-initializing
// micro-kernel) and beyond it (init, then accumulating calls), N a partial panel.
func TestSymbolicPackedMatMul(t *testing.T) {
	f := tensor.Float32
	l := Strategies(kernels.Default())
	for _, k := range []int{40, 300} {
		a := nt.Sym(f, "b", "s", strconv.Itoa(k))
		nt.CheckSymbolic(t, l, graph.OpMatMul, nil, 1, []nt.SymArg{a, nt.SymC(f32(uint64(k), k, 37))}, rowBinds()...)
		st := nt.CheckSymbolicFused(t, l, graph.OpMatMul, nil, []nt.SymArg{a, nt.SymC(f32(uint64(k), k, 37))}, nil, rowBinds()...)
		wantPacked(t, st)
	}
}

// TestSymbolicPackedEpilogues: bias; bias and Gelu (a feed-forward layer); bias and a
// residual add of a run-time tensor of the output's shape; Gemm with alpha, beta and
// a transposed B.
func TestSymbolicPackedEpilogues(t *testing.T) {
	f := tensor.Float32
	l := Strategies(kernels.Default())
	a := nt.Sym(f, "b", "s", "24")
	w := nt.SymC(f32(81, 24, 37))
	bias := graph.OpAdd.NewAttrs()
	add := nt.SymStage{Op: graph.OpAdd, Attrs: bias, Args: []nt.SymArg{nt.SymNone, nt.SymC(f32(82, 37))}}
	gelu := nt.SymStage{Op: graph.OpGelu, Attrs: graph.OpGelu.NewAttrs(), Args: []nt.SymArg{nt.SymNone}}
	residual := nt.SymStage{Op: graph.OpAdd, Attrs: bias, At: 1, Args: []nt.SymArg{nt.Sym(f, "b", "s", "37"), nt.SymNone}}
	for _, stages := range [][]nt.SymStage{{add}, {add, gelu}, {add, residual}} {
		wantPacked(t, nt.CheckSymbolicFused(t, l, graph.OpMatMul, nil, []nt.SymArg{a, w}, stages, rowBinds()...))
	}
	gemm := graph.OpGemm.NewAttrs().(*graph.GemmAttrs)
	gemm.TransB, gemm.Alpha, gemm.Beta = 1, 0.5, 2
	m := []map[string]int64{{"m": 0}, {"m": 1}, {"m": 7}, {"m": 37}}
	args := []nt.SymArg{nt.Sym(f, "m", "24"), nt.SymC(f32(83, 37, 24)), nt.SymC(f32(84, 37))}
	nt.CheckSymbolic(t, l, graph.OpGemm, gemm, 1, args, m...)
	wantPacked(t, nt.CheckSymbolicFused(t, l, graph.OpGemm, gemm, args, []nt.SymStage{gelu}, m...))
}

// TestSymbolicMatMulOverWideWeightsRunsPanelPairsInParallel: over symbolic rows, a B
// of at least wide_b_mib MiB makes the parallel loop the fused (column panel, row
// block) pairs, so that a few rows at run time still spread over the threads; under
// it (or with the knob at 0) the row blocks stay the parallel loop. Both match the
// reference at every row count.
func TestSymbolicMatMulOverWideWeightsRunsPanelPairsInParallel(t *testing.T) {
	f := tensor.Float32
	st := tunedStrategy(t, graph.OpMatMul, "matmul-packed-tensorized", "wide_b_mib")
	const k, n = 700, 750 // B: 2,100,000 bytes, just over 2 MiB
	a := nt.Sym(f, "b", "s", strconv.Itoa(k))
	w := nt.SymC(f32(91, k, n))
	for _, tc := range []struct {
		wide  int64
		pairs bool
	}{{2, true}, {0, false}, {8, false}} {
		knobs := kernels.Knobs{}
		for _, kn := range st.Knobs {
			knobs[kn.Name] = kn.Default
		}
		knobs["wide_b_mib"] = tc.wide
		l := &firstLowered{l: tunedLowerer{st: st, knobs: knobs}}
		nt.CheckSymbolic(t, l, graph.OpMatMul, nil, 1, []nt.SymArg{a, w}, rowBinds()...)
		if got := strings.Contains(l.impl.Trace.String(), "fuse"); got != tc.pairs {
			t.Errorf("wide_b_mib %d: fused pairs %v, want %v:\n%s", tc.wide, got, tc.pairs, l.impl.Trace)
		}
	}
}

// firstLowered keeps the first kernel l lowers (CheckSymbolic's symbolic one).
type firstLowered struct {
	l    nt.Lowerer
	impl *kernels.Impl
}

func (f *firstLowered) Lower(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
	impl, err := f.l.Lower(n, in, t)
	if f.impl == nil {
		f.impl = impl
	}
	return impl, err
}
