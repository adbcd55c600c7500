package tensor

import (
	"errors"
	"math"
	"testing"
)

func TestRawRoundTrip(t *testing.T) {
	cases := []*Tensor{
		MustFromSlice(Shape{2, 2}, []float32{1, -2.5, float32(math.Inf(1)), 0}),
		MustFromSlice(Shape{3}, []int64{math.MaxInt64, -1, 0}),
		MustFromSlice(Shape{2}, []uint64{math.MaxUint64, 7}),
		MustFromSlice(Shape{2}, []bool{true, false}),
		MustFromSlice(Shape{2}, []Float16Bits{F32ToF16(1.5), F32ToF16(-2)}),
		MustFromSlice(Shape{2}, []BFloat16Bits{F32ToBF16(3), F32ToBF16(-0.5)}),
		MustFromSlice(Shape{}, []int8{-128}),
		MustFromSlice(Shape{1}, []complex64{complex(1, 2)}),
	}
	for _, c := range cases {
		raw, err := c.Raw()
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		back, err := FromRaw(c.DType, c.Shape, raw)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if back.String() != c.String() {
			t.Errorf("round trip %v -> %v", c, back)
		}
	}
	if _, err := FromRaw(Float32, Shape{2}, make([]byte, 7)); !errors.Is(err, ErrShape) {
		t.Errorf("short raw data: got %v, want ErrShape", err)
	}
}

func TestCast(t *testing.T) {
	f := MustFromSlice(Shape{4}, []float32{1.9, -1.9, 300, 0})
	if got := f.Cast(Int8).Data.([]int8); got[0] != 1 || got[1] != -1 || got[3] != 0 {
		t.Errorf("float→int8 = %v", got)
	}
	if got := f.Cast(Bool).Data.([]bool); !got[0] || got[3] {
		t.Errorf("float→bool = %v", got)
	}
	s := MustFromSlice(Shape{3}, []string{"1.5", "-INF", "NaN"})
	got := s.Cast(Float32).Data.([]float32)
	if got[0] != 1.5 || !math.IsInf(float64(got[1]), -1) || got[2] == got[2] {
		t.Errorf("string→float = %v", got)
	}
	big := MustFromSlice(Shape{1}, []int64{1<<62 + 1})
	if v := big.Cast(Uint64).Int64s()[0]; v != 1<<62+1 {
		t.Errorf("int64→uint64 lost precision: %d", v)
	}
	if h := F16ToF32(F32ToF16(0.1)); math.Abs(float64(h)-0.1) > 1e-4 {
		t.Errorf("f16(0.1) = %v", h)
	}
	if b := BF16ToF32(F32ToBF16(1.0 / 3)); math.Abs(float64(b)-1.0/3) > 2e-3 {
		t.Errorf("bf16(1/3) = %v", b)
	}
}

func TestShapes(t *testing.T) {
	s, err := BroadcastShapes(Shape{2, 1, 3}, Shape{4, 1})
	if err != nil || !s.Equal(Shape{2, 4, 3}) {
		t.Errorf("broadcast = %v, %v", s, err)
	}
	if _, err := BroadcastShapes(Shape{2}, Shape{3}); !errors.Is(err, ErrShape) {
		t.Errorf("incompatible broadcast: %v", err)
	}
	if _, err := (Shape{1 << 40, 1 << 40}).CheckedNumElements(1 << 32); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge shape: %v", err)
	}
	if n, err := (Shape{0, 1 << 62}).CheckedNumElements(10); err != nil || n != 0 {
		t.Errorf("empty shape: %d, %v", n, err)
	}
	if st := (Shape{2, 3, 4}).Strides(); st[0] != 12 || st[1] != 4 || st[2] != 1 {
		t.Errorf("strides = %v", st)
	}
	if a, err := NormAxis(-1, 3); err != nil || a != 2 {
		t.Errorf("NormAxis(-1,3) = %d, %v", a, err)
	}
	if _, err := NormAxis(3, 3); err == nil {
		t.Error("NormAxis(3,3) should fail")
	}
}

func TestFromSliceChecks(t *testing.T) {
	if _, err := FromSlice(Shape{3}, []float32{1, 2}); !errors.Is(err, ErrShape) {
		t.Errorf("length mismatch: %v", err)
	}
	if _, err := FromSlice(Shape{1}, []struct{}{{}}); !errors.Is(err, ErrDType) {
		t.Errorf("bad element type: %v", err)
	}
	tt := New(Float16, Shape{2, 2})
	if err := tt.Check(); err != nil || tt.Len() != 4 {
		t.Errorf("New: %v len %d", err, tt.Len())
	}
	if d, err := ParseDType("FLOAT"); err != nil || d != Float32 {
		t.Errorf("ParseDType(FLOAT) = %v, %v", d, err)
	}
}
