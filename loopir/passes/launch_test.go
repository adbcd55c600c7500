package passes

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// tailKernel is y[b*64 + t] = 0 for t < min(64, n - 64b): blocks over ceil(n/64) bound
// to blockIdx.x, a tail-shaped thread loop bound to threadIdx.x (extent up to 64).
func tailKernel() (*loopir.PrimFunc, *loopir.Var) {
	n := loopir.NewVar("n")
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{n}}
	b, t := loopir.NewVar("b"), loopir.NewVar("t")
	grid := loopir.Bin(loopir.Div, loopir.Bin(loopir.Add, n, loopir.Int(63)), loopir.Int(64))
	tail := loopir.Bin(loopir.Min, loopir.Int(64), loopir.Bin(loopir.Sub, n, loopir.Bin(loopir.Mul, b, loopir.Int(64))))
	store := &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, b, loopir.Int(64)), t)}, Value: loopir.Float(0, tensor.Float32)}
	return &loopir.PrimFunc{Name: "zero", Params: []*loopir.Buffer{y}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: b, Min: loopir.Int(0), Extent: grid, Kind: loopir.Bound(loopir.BlockIdxX),
			Body: &loopir.For{Var: t, Min: loopir.Int(0), Extent: tail, Kind: loopir.Bound(loopir.ThreadIdxX), Body: store}}}, n
}

var gpu = target.GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 49152, ComputeUnits: 80}

func TestLaunchIsDerivedFromBoundLoopsAndATailGetsAGuard(t *testing.T) {
	f, _ := tailKernel()
	g, l, err := DeriveLaunch(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), "grid(((n + 63) / 64), 1, 1) block(64, 1, 1)"; got != want {
		t.Errorf("launch = %s, want %s", got, want)
	}
	text := loopir.Print(g)
	for _, want := range []string{"for t in [0, 64) bind(threadIdx.x) {", "if (t < min(64, (n - (b * 64)))) {"} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, text)
		}
	}
	if err := loopir.Verify(g); err != nil {
		t.Fatal(err)
	}
	if err := VerifyLaunch(g, l, gpu); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyLaunchRefusesMoreThreadsThanTheTargetAllows(t *testing.T) {
	f, _ := tailKernel()
	g, l, err := DeriveLaunch(f)
	if err != nil {
		t.Fatal(err)
	}
	small := gpu
	small.MaxWorkGroup = 32
	err = VerifyLaunch(g, l, small)
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "kernel zero") || !strings.Contains(err.Error(), "64 threads") {
		t.Fatalf("err = %v, want ErrLaunch naming kernel zero and its 64 threads", err)
	}
}

func TestDeriveLaunchRefusesWritesOutsideTheBoundLoops(t *testing.T) {
	f, n := tailKernel()
	y := f.Params[0]
	outside := &loopir.PrimFunc{Name: "stray", Params: f.Params, Dims: f.Dims, Body: loopir.Seq{
		&loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Int(0)}, Value: loopir.Float(1, tensor.Float32)}, f.Body}}
	local := &loopir.Buffer{Name: "tmp", DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "local"}
	shared := &loopir.PrimFunc{Name: "shared_tmp", Params: f.Params, Dims: f.Dims, Body: &loopir.Allocate{Buf: local, Body: f.Body}}
	for _, g := range []*loopir.PrimFunc{outside, shared} {
		if _, _, err := DeriveLaunch(g); !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), g.Name) {
			t.Errorf("%s: err = %v, want ErrLaunch naming the kernel", g.Name, err)
		}
	}
}
