package tensor

import (
	"fmt"
	"math"
)

// Checked size arithmetic: the one way to compute an element count, a byte count, an
// offset or a stride from extents that come from a model, a request or a cache file.
// Every result fits an int64; a product or sum that would not is an error wrapping
// ErrTooLarge, and a negative extent is one wrapping ErrShape.

// CheckedMul is a*b for non-negative sizes, or an error wrapping ErrTooLarge when the
// product does not fit an int64.
func CheckedMul(a, b int64) (int64, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("%w: negative size in %d×%d", ErrShape, a, b)
	}
	if a != 0 && b > math.MaxInt64/a {
		return 0, fmt.Errorf("%w: %d×%d overflows int64", ErrTooLarge, a, b)
	}
	return a * b, nil
}

// CheckedAdd is a+b for non-negative sizes, or an error wrapping ErrTooLarge when the
// sum does not fit an int64.
func CheckedAdd(a, b int64) (int64, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("%w: negative size in %d+%d", ErrShape, a, b)
	}
	if a > math.MaxInt64-b {
		return 0, fmt.Errorf("%w: %d+%d overflows int64", ErrTooLarge, a, b)
	}
	return a + b, nil
}

// CheckedSize is the element count and the byte count of a dt tensor with the given
// extents. A negative extent wraps ErrShape; a count that does not fit an int64 wraps
// ErrTooLarge, even when another extent is 0 (such a shape has strides that overflow).
func CheckedSize[T ~int | ~int64](dt DType, dims []T) (elems, bytes int64, err error) {
	elems = 1
	for _, d := range dims {
		if d < 0 {
			return 0, 0, fmt.Errorf("%w: negative extent in %v", ErrShape, dims)
		}
		if elems, err = CheckedMul(elems, int64(d)); err != nil {
			return 0, 0, fmt.Errorf("%w: %v has more elements than an int64 counts", ErrTooLarge, dims)
		}
	}
	if bytes, err = CheckedMul(elems, int64(dt.Size())); err != nil {
		return 0, 0, fmt.Errorf("%w: a %v%v tensor has more bytes than an int64 counts", ErrTooLarge, dt, dims)
	}
	return elems, bytes, nil
}

// CheckedBytes is CheckedSize's byte count.
func CheckedBytes[T ~int | ~int64](dt DType, dims []T) (int64, error) {
	_, b, err := CheckedSize(dt, dims)
	return b, err
}

// SignedMul is a*b for signed values (the terms of a polynomial extent such as s-1);
// ok is false when the product does not fit an int64.
func SignedMul(a, b int64) (p int64, ok bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p = a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}

// SignedAdd is a+b for signed values; ok is false when the sum does not fit an int64.
func SignedAdd(a, b int64) (s int64, ok bool) {
	s = a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}
