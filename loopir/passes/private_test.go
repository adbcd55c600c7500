package passes

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// rowSums is y[i] = 2·Σ_k x[i, k] over i < n, i = b·64 + t (b bound to blockIdx.x, t to
// threadIdx.x), accumulated in acc, a local buffer of n×width allocated around the
// bound loops; index gives acc's index from i and the loop j in [0, width) inside the
// thread, which writes every acc[i, j] and reads acc[i, 0].
func rowSums(width int64, index func(i, t, j loopir.Expr) []loopir.Expr) *loopir.PrimFunc {
	n := loopir.NewVar("n")
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{n, loopir.Int(5)}}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{n}}
	acc := &loopir.Buffer{Name: "acc", DT: tensor.Float32, Shape: []loopir.Expr{n, loopir.Int(width)}, Scope: "local"}
	b, t, j, k := loopir.NewVar("b"), loopir.NewVar("t"), loopir.NewVar("j"), loopir.NewVar("k")
	i := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, b, loopir.Int(64)), t)
	at := func(j loopir.Expr) *loopir.Load { return &loopir.Load{Buf: acc, Index: index(i, t, j)} }
	f32 := func(v float64) loopir.Expr { return loopir.Float(v, tensor.Float32) }
	body := loopir.Seq{
		&loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(width),
			Body: &loopir.Store{Buf: acc, Index: index(i, t, j), Value: f32(0)}},
		&loopir.For{Var: k, Min: loopir.Int(0), Extent: loopir.Int(5),
			Body: &loopir.Store{Buf: acc, Index: index(i, t, loopir.Int(0)),
				Value: loopir.Bin(loopir.Add, at(loopir.Int(0)), &loopir.Load{Buf: x, Index: []loopir.Expr{i, k}})}},
		&loopir.Store{Buf: y, Index: []loopir.Expr{i}, Value: loopir.Bin(loopir.Mul, at(loopir.Int(0)), f32(2))},
	}
	grid := loopir.Bin(loopir.Div, loopir.Bin(loopir.Add, n, loopir.Int(63)), loopir.Int(64))
	return &loopir.PrimFunc{Name: "row_sums", Params: []*loopir.Buffer{x, y}, Dims: []*loopir.Var{n},
		Body: &loopir.Allocate{Buf: acc,
			Body: &loopir.For{Var: b, Min: loopir.Int(0), Extent: grid, Kind: loopir.Bound(loopir.BlockIdxX),
				Body: &loopir.For{Var: t, Min: loopir.Int(0), Extent: loopir.Int(64), Kind: loopir.Bound(loopir.ThreadIdxX),
					Body: &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, i, n), Then: body}}}}}
}

func TestPrivatizeLocalGivesEachThreadItsOwnRegion(t *testing.T) {
	f := rowSums(3, func(i, _, j loopir.Expr) []loopir.Expr { return []loopir.Expr{i, j} })
	if _, _, err := DeriveLaunch(f); !errors.Is(err, ErrLaunch) {
		t.Fatalf("before: err = %v, want ErrLaunch (a local buffer around the bound loops)", err)
	}
	g := PrivatizeLocal(f)
	if err := loopir.Verify(g); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(g)
	for _, want := range []string{
		"for t in [0, 64) bind(threadIdx.x) {\n      alloc acc: f32[1, 3] local {",
		"acc[0, j] = 0f",
		"acc[0, 0] = (acc[0, 0] + x[((b * 64) + t), k])",
		"y[((b * 64) + t)] = (acc[0, 0] * 2f)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, text)
		}
	}
	if _, _, err := DeriveLaunch(g); err != nil {
		t.Fatalf("after: %v", err)
	}
}

func TestPrivatizeLocalRebasesIndicesThatDifferByConstants(t *testing.T) {
	// acc[i + 2, j + 1]: the thread's region starts at (i + 2, 1)
	f := rowSums(2, func(i, _, j loopir.Expr) []loopir.Expr {
		return []loopir.Expr{loopir.Bin(loopir.Add, i, loopir.Int(2)), loopir.Bin(loopir.Add, j, loopir.Int(1))}
	})
	text := loopir.Print(PrivatizeLocal(f))
	for _, want := range []string{"alloc acc: f32[1, 2] local", "acc[0, j] = 0f", "acc[0, 0] = (acc[0, 0] +"} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, text)
		}
	}
}

func TestPrivatizeLocalLeavesARegionItCannotBound(t *testing.T) {
	// acc[i, t·j]: the coefficient of j depends on the thread
	f := rowSums(3, func(i, t, j loopir.Expr) []loopir.Expr { return []loopir.Expr{i, loopir.Bin(loopir.Mul, t, j)} })
	g := PrivatizeLocal(f)
	if got, want := loopir.Print(g), loopir.Print(f); got != want {
		t.Errorf("the kernel changed:\n%s", got)
	}
	if _, _, err := DeriveLaunch(g); !errors.Is(err, ErrLaunch) {
		t.Errorf("err = %v, want ErrLaunch", err)
	}
}

func TestPrivatizeLocalLeavesBuffersOfFunctionsWithoutBoundLoops(t *testing.T) {
	f := rowSums(3, func(i, _, j loopir.Expr) []loopir.Expr { return []loopir.Expr{i, j} })
	serial := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if l, ok := s.(*loopir.For); ok {
			return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Body: l.Body}
		}
		return nil
	})
	cpu := &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: serial}
	if got, want := loopir.Print(PrivatizeLocal(cpu)), loopir.Print(cpu); got != want {
		t.Errorf("the function changed:\n%s", got)
	}
}
