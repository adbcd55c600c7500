package codegen_test

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// laneSums is a global pool over channel lanes: Y[l] = sum over r < n of X[r*16 + l],
// the 16-lane loop vectorized inside the serial loop over r (each lane accumulates into
// its own element of Y).
func laneSums() *loopir.PrimFunc { return laneSumsInto(16) }

// laneSumsInto is laneSums with a Y of yLen elements (fewer than 16: the last lanes
// accumulate past its end).
func laneSumsInto(yLen int64) *loopir.PrimFunc {
	const lanes = 16
	n, r, l, l0 := loopir.NewVar("n"), loopir.NewVar("r"), loopir.NewVar("l"), loopir.NewVar("l0")
	x := &loopir.Buffer{Name: "X", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Bin(loopir.Mul, n, loopir.Int(lanes))}, Scope: "global"}
	y := &loopir.Buffer{Name: "Y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(yLen)}, Scope: "global"}
	init := &loopir.For{Var: l0, Min: loopir.Int(0), Extent: loopir.Int(yLen), Kind: loopir.Vectorized,
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{l0}, Value: loopir.Float(0, tensor.Float32)}}
	acc := &loopir.Store{Buf: y, Index: []loopir.Expr{l}, Value: loopir.Bin(loopir.Add,
		&loopir.Load{Buf: y, Index: []loopir.Expr{l}},
		&loopir.Load{Buf: x, Index: []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(lanes)), l)}})}
	sum := &loopir.For{Var: r, Min: loopir.Int(0), Extent: n, Kind: loopir.Serial,
		Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(lanes), Kind: loopir.Vectorized, Body: acc}}
	return &loopir.PrimFunc{Name: "lane_sums", Params: []*loopir.Buffer{x, y}, Dims: []*loopir.Var{n},
		Body: loopir.Seq{init, sum}}
}

// TestLaneAccumulationIsOneSIMDLoop: a vectorized loop whose lanes accumulate into their
// own elements is emitted under `#pragma omp simd` (with ivdep gcc unrolls the 16 lanes
// completely and leaves them scalar), not as a reduction into one element, and sums
// what the serial loop sums.
func TestLaneAccumulationIsOneSIMDLoop(t *testing.T) {
	f := laneSums()
	src, err := codegen.EmitC(f)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`#pragma omp simd\n\s*for \(i64 v_l = `).MatchString(src.Code) {
		t.Errorf("the lane loop is not emitted under #pragma omp simd:\n%s", src.Code)
	}
	if regexp.MustCompile(`omp simd reduction`).MatchString(src.Code) {
		t.Errorf("the lane loop is emitted as a reduction into one element:\n%s", src.Code)
	}
	const n = 37
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n*16)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	got := kerneltest.Run(t, laneSums(), []int64{n}, 16, x)
	for l := range 16 {
		var want float32
		for i := range n {
			want += x[i*16+l]
		}
		if d := got[l] - want; d > 1e-5 || d < -1e-5 {
			t.Errorf("lane %d: got %g, want %g", l, got[l], want)
		}
	}
}

// TestLaneAccumulationBoundsChecked: a checked build of the omp simd lane loop compiles
// and sums correctly, and lanes accumulating past the end of their output make the
// kernel return StatusOutOfBounds instead of writing past it.
func TestLaneAccumulationBoundsChecked(t *testing.T) {
	const n = 5
	x := make([]float32, n*16)
	for i := range x {
		x[i] = 1
	}
	dev, k := buildChecked(t, laneSums())
	got, err := kerneltest.Launch(dev, k, []int64{n}, 16, x)
	if err != nil || got[15] != n {
		t.Fatalf("in bounds: %v, %v", got, err)
	}
	dev, k = buildChecked(t, laneSumsInto(15))
	_, err = kerneltest.Launch(dev, k, []int64{n}, 15, x)
	var ke *devices.KernelError
	if !errors.As(err, &ke) || ke.Code != codegen.StatusOutOfBounds {
		t.Fatalf("got %v (%+v), want status %d", err, ke, codegen.StatusOutOfBounds)
	}
}
