package tensor

import (
	"errors"
	"math"
	"testing"
)

// TestCheckedSizeRefusesWhatInt64CannotCount: element and byte counts that leave int64
// are ErrTooLarge (the 2^31×2^31 float32 tensor's 2^64 bytes used to wrap to 0), a
// negative extent is ErrShape, and counts that fit are exact.
func TestCheckedSizeRefusesWhatInt64CannotCount(t *testing.T) {
	if _, err := CheckedBytes(Float32, []int64{1 << 31, 1 << 31}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^62 float32: %v", err)
	}
	if _, err := CheckedBytes(Uint8, []int{1 << 40, 1 << 40, 0}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^80 elements before a 0: %v", err)
	}
	if _, err := CheckedBytes(Float32, []int64{3, -1}); !errors.Is(err, ErrShape) {
		t.Errorf("negative extent: %v", err)
	}
	if n, b, err := CheckedSize(Float32, []int64{1 << 30, 1 << 30}); err != nil || n != 1<<60 || b != 1<<62 {
		t.Errorf("2^60 float32: %d elements, %d bytes, %v", n, b, err)
	}
	if n, b, err := CheckedSize(Float64, []int{}); err != nil || n != 1 || b != 8 {
		t.Errorf("scalar: %d, %d, %v", n, b, err)
	}
	if _, err := CheckedAdd(math.MaxInt64, 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxInt64+1: %v", err)
	}
	for _, c := range []struct {
		a, b int64
		ok   bool
	}{{math.MaxInt64, 1, true}, {math.MinInt64, -1, false}, {-1, math.MinInt64, false}, {1 << 32, 1 << 31, false}, {1 << 32, -(1 << 31), true}, {1 << 31, 1 << 31, true}, {1 << 32, 1 << 32, false}, {-(1 << 32), 1 << 32, false}} {
		p, ok := SignedMul(c.a, c.b)
		if ok != c.ok || (ok && p != c.a*c.b) {
			t.Errorf("SignedMul(%d, %d) = %d, %v", c.a, c.b, p, ok)
		}
	}
	if _, ok := SignedAdd(math.MaxInt64, 1); ok {
		t.Error("SignedAdd(MaxInt64, 1) did not overflow")
	}
	if _, ok := SignedAdd(math.MinInt64, -1); ok {
		t.Error("SignedAdd(MinInt64, -1) did not overflow")
	}
	if s, ok := SignedAdd(math.MinInt64, math.MaxInt64); !ok || s != -1 {
		t.Errorf("SignedAdd(MinInt64, MaxInt64) = %d, %v", s, ok)
	}
}
