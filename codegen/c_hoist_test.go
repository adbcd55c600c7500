package codegen_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// zeroPointLanes is Y[r, l] = (X[r, l] − float(Z[0])) · float(Q[r, l]) over rows r of
// 16 lanes, the lane loop vectorized, plus, where X[r, l] > 0, float(Z[1]) added under
// a conditional store: Z[0] and Z[1] are uint8 zero points read on every lane, Q a
// uint8 operand read per lane.
func zeroPointLanes(rows int64) *loopir.PrimFunc {
	const lanes = 16
	r, l := loopir.NewVar("r"), loopir.NewVar("l")
	buf := func(name string, dt tensor.DType, n int64) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: dt, Shape: []loopir.Expr{loopir.Int(n)}, Scope: "global"}
	}
	x, z, q, y := buf("X", tensor.Float32, rows*lanes), buf("Z", tensor.Uint8, 2), buf("Q", tensor.Uint8, rows*lanes), buf("Y", tensor.Float32, rows*lanes)
	at := []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(lanes)), l)}
	f32 := func(e loopir.Expr) loopir.Expr { return &loopir.Cast{To: tensor.Float32, X: e} }
	xv := &loopir.Load{Buf: x, Index: at}
	store := &loopir.Store{Buf: y, Index: at, Value: loopir.Bin(loopir.Mul,
		loopir.Bin(loopir.Sub, xv, f32(&loopir.Load{Buf: z, Index: []loopir.Expr{loopir.Int(0)}})),
		f32(&loopir.Load{Buf: q, Index: at}))}
	guarded := &loopir.IfThenElse{Cond: loopir.Bin(loopir.GT, xv, loopir.Float(0, tensor.Float32)),
		Then: &loopir.Store{Buf: y, Index: at, Value: loopir.Bin(loopir.Add, &loopir.Load{Buf: y, Index: at},
			f32(&loopir.Load{Buf: z, Index: []loopir.Expr{loopir.Int(1)}}))}}
	body := &loopir.For{Var: r, Min: loopir.Int(0), Extent: loopir.Int(rows), Kind: loopir.Serial,
		Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(lanes), Kind: loopir.Vectorized, Body: loopir.Seq{store, guarded}}}
	return &loopir.PrimFunc{Name: "zero_point_lanes", Params: []*loopir.Buffer{x, z, q, y}, Body: body}
}

// TestNarrowInvariantLoadsLeaveTheSIMDLoop: the widening cast of a uint8 read that does
// not depend on the vectorized loop is printed before it as a float constant (gcc would
// size the loop's vectors by the uint8 and run its floats four to a vector); the
// per-lane uint8 read and the one under a conditional store stay in the loop; the
// kernel computes what the loop says.
func TestNarrowInvariantLoadsLeaveTheSIMDLoop(t *testing.T) {
	const rows = 3
	src, err := codegen.EmitC(zeroPointLanes(rows))
	if err != nil {
		t.Fatal(err)
	}
	hoisted := regexp.MustCompile(`const float (kiln_hv\d+) = \(\(float\)\(v_Z\[0LL\]\)\);\n\s*#pragma omp simd\n`)
	m := hoisted.FindStringSubmatch(src.Code)
	if m == nil {
		t.Fatalf("Z[0]'s cast is not hoisted before the SIMD loop:\n%s", src.Code)
	}
	loop := src.Code[strings.Index(src.Code, "#pragma omp simd"):]
	for _, want := range []string{m[1], "v_Q[", "v_Z[1LL]"} {
		if !strings.Contains(loop, want) {
			t.Errorf("the SIMD loop does not read %s:\n%s", want, src.Code)
		}
	}
	if strings.Contains(loop, "v_Z[0LL]") {
		t.Errorf("the SIMD loop still reads Z[0]:\n%s", src.Code)
	}
	x := make([]float32, rows*16)
	q := make([]uint8, rows*16)
	for i := range x {
		x[i], q[i] = float32(i%7)-3, uint8(i*37)
	}
	z := []uint8{2, 200}
	got := kerneltest.RunTensors(t, zeroPointLanes(rows), []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{rows * 16}, x),
		tensor.MustFromSlice(tensor.Shape{2}, z), tensor.MustFromSlice(tensor.Shape{rows * 16}, q)}, tensor.Float32, tensor.Shape{rows * 16})
	for i, g := range got.Data.([]float32) {
		want := (x[i] - float32(z[0])) * float32(q[i])
		if x[i] > 0 {
			want += float32(z[1])
		}
		if g != want {
			t.Fatalf("Y[%d] = %g, want %g", i, g, want)
		}
	}
}
