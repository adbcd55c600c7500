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

// narrowStoreLanes is Y[r, l] = uint8(min(max(X[r, l] · float(Q[r, l]), 0), 255)) over
// rows of 16 lanes, the lane loop vectorized: a uint8 read and a uint8 store per lane
// around float arithmetic.
func narrowStoreLanes(rows int64) *loopir.PrimFunc {
	const lanes = 16
	r, l := loopir.NewVar("r"), loopir.NewVar("l")
	buf := func(name string, dt tensor.DType) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: dt, Shape: []loopir.Expr{loopir.Int(rows * lanes)}, Scope: "global"}
	}
	x, q, y := buf("X", tensor.Float32), buf("Q", tensor.Uint8), buf("Y", tensor.Uint8)
	at := []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, r, loopir.Int(lanes)), l)}
	v := loopir.Bin(loopir.Mul, &loopir.Load{Buf: x, Index: at}, &loopir.Cast{To: tensor.Float32, X: &loopir.Load{Buf: q, Index: at}})
	v = loopir.Bin(loopir.Min, loopir.Bin(loopir.Max, v, loopir.Float(0, tensor.Float32)), loopir.Float(255, tensor.Float32))
	body := &loopir.For{Var: r, Min: loopir.Int(0), Extent: loopir.Int(rows), Kind: loopir.Serial,
		Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(lanes), Kind: loopir.Vectorized,
			Body: &loopir.Store{Buf: y, Index: at, Value: &loopir.Cast{To: tensor.Uint8, X: v}}}}
	return &loopir.PrimFunc{Name: "narrow_store_lanes", Params: []*loopir.Buffer{x, q, y}, Body: body}
}

// TestNarrowLanesSplitAroundTheWideArithmetic: a 16-lane loop that reads and stores
// uint8 around float arithmetic is printed as three SIMD loops (the uint8 read widened
// into a float temporary, the arithmetic in floats only, the narrowing store), and
// computes what the loop says.
func TestNarrowLanesSplitAroundTheWideArithmetic(t *testing.T) {
	const rows = 3
	src, err := codegen.EmitC(narrowStoreLanes(rows))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(src.Code, "#pragma omp simd"); n != 3 {
		t.Errorf("%d SIMD loops, want 3:\n%s", n, src.Code)
	}
	arith := regexp.MustCompile(`kiln_lo\d+\[[^]]*\] = [^;]*kiln_lw\d+_0\[`)
	if !arith.MatchString(src.Code) || regexp.MustCompile(`kiln_lo\d+\[[^]]*\] = [^;]*v_Q\[`).MatchString(src.Code) {
		t.Errorf("the arithmetic loop does not read the widened temporary alone:\n%s", src.Code)
	}
	x := make([]float32, rows*16)
	q := make([]uint8, rows*16)
	for i := range x {
		x[i], q[i] = float32(i%9)-2.5, uint8(i*29)
	}
	got := kerneltest.RunTensors(t, narrowStoreLanes(rows), []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{rows * 16}, x),
		tensor.MustFromSlice(tensor.Shape{rows * 16}, q)}, tensor.Uint8, tensor.Shape{rows * 16})
	for i, g := range got.Data.([]uint8) {
		want := uint8(min(max(x[i]*float32(q[i]), 0), 255))
		if g != want {
			t.Fatalf("Y[%d] = %d, want %d", i, g, want)
		}
	}
}

// TestHoistedLoadsOfSameNamedBuffers: two uint8 parameters that share a name (a fused
// kernel's zero points, each its op's "in2") hoisted out of one SIMD loop stay two
// values: a hoisted expression is identified by its C text, whose identifiers are
// unique, not by loopir's, which names buffers by their names.
func TestHoistedLoadsOfSameNamedBuffers(t *testing.T) {
	const n = 32
	l := loopir.NewVar("l")
	buf := func(dt tensor.DType, size int64) *loopir.Buffer {
		return &loopir.Buffer{Name: "in2", DT: dt, Shape: []loopir.Expr{loopir.Int(size)}, Scope: "global"}
	}
	za, zb, y := buf(tensor.Uint8, 1), buf(tensor.Uint8, 1), &loopir.Buffer{Name: "Y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(n)}, Scope: "global"}
	zero := []loopir.Expr{loopir.Int(0)}
	f32 := func(b *loopir.Buffer) loopir.Expr {
		return &loopir.Cast{To: tensor.Float32, X: &loopir.Load{Buf: b, Index: zero}}
	}
	value := loopir.Bin(loopir.Sub, loopir.Bin(loopir.Mul, &loopir.Cast{To: tensor.Float32, X: l}, f32(za)), f32(zb))
	f := &loopir.PrimFunc{Name: "same_named", Params: []*loopir.Buffer{za, zb, y},
		Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: loopir.Int(n), Kind: loopir.Vectorized, Body: &loopir.Store{Buf: y, Index: []loopir.Expr{l}, Value: value}}}
	got := kerneltest.RunTensors(t, f, []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{1}, []uint8{3}), tensor.MustFromSlice(tensor.Shape{1}, []uint8{200})},
		tensor.Float32, tensor.Shape{n})
	for i, g := range got.Data.([]float32) {
		if want := float32(i)*3 - 200; g != want {
			t.Fatalf("Y[%d] = %g, want %g", i, g, want)
		}
	}
}

// TestSiblingLoopsHoistIntoOneScope: two vectorized loops side by side each hoist a
// zero point before themselves, into the same C scope: the constants get distinct
// names, and the kernel compiles and computes what the loops say.
func TestSiblingLoopsHoistIntoOneScope(t *testing.T) {
	const n = 16
	a, b := loopir.NewVar("a"), loopir.NewVar("b")
	z := &loopir.Buffer{Name: "Z", DT: tensor.Uint8, Shape: []loopir.Expr{loopir.Int(2)}, Scope: "global"}
	y := &loopir.Buffer{Name: "Y", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(2 * n)}, Scope: "global"}
	f32 := func(e loopir.Expr) loopir.Expr { return &loopir.Cast{To: tensor.Float32, X: e} }
	zAt := func(i int64) loopir.Expr { return f32(&loopir.Load{Buf: z, Index: []loopir.Expr{loopir.Int(i)}}) }
	first := &loopir.For{Var: a, Min: loopir.Int(0), Extent: loopir.Int(n), Kind: loopir.Vectorized,
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{a}, Value: loopir.Bin(loopir.Add, f32(a), zAt(0))}}
	second := &loopir.For{Var: b, Min: loopir.Int(0), Extent: loopir.Int(n), Kind: loopir.Vectorized,
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, b, loopir.Int(n))}, Value: loopir.Bin(loopir.Sub, f32(b), zAt(1))}}
	f := &loopir.PrimFunc{Name: "siblings", Params: []*loopir.Buffer{z, y}, Body: loopir.Seq{first, second}}
	got := kerneltest.RunTensors(t, f, []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{2}, []uint8{5, 7})}, tensor.Float32, tensor.Shape{2 * n})
	for i, g := range got.Data.([]float32) {
		want := float32(i) + 5
		if i >= n {
			want = float32(i-n) - 7
		}
		if g != want {
			t.Fatalf("Y[%d] = %g, want %g", i, g, want)
		}
	}
}
