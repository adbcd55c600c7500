package tensor

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape is a list of non-negative extents; the empty shape is a scalar.
type Shape []int

// NumElements is the product of the extents (1 for a scalar).
func (s Shape) NumElements() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// CheckedNumElements is NumElements for untrusted shapes: it rejects negative extents and
// products that overflow (CheckedSize) or exceed limit elements (limit <= 0 means no
// limit).
func (s Shape) CheckedNumElements(limit int64) (int64, error) {
	n, _, err := CheckedSize(Undefined, s)
	if err != nil {
		return 0, err
	}
	if limit > 0 && n > limit {
		return 0, fmt.Errorf("%w: %v has %d elements, limit %d", ErrTooLarge, s, n, limit)
	}
	return n, nil
}

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Equal reports whether two shapes have the same extents.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy (never nil for a non-nil receiver).
func (s Shape) Clone() Shape { return append(Shape{}, s...) }

// Strides returns row-major element strides.
func (s Shape) Strides() []int {
	st := make([]int, len(s))
	acc := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// BroadcastShapes applies multidirectional (numpy) broadcasting to the shapes.
func BroadcastShapes(shapes ...Shape) (Shape, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make(Shape, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			switch {
			case d == out[off+i] || d == 1:
			case out[off+i] == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("%w: cannot broadcast %v with %v", ErrShape, shapes[0], s)
			}
		}
	}
	return out, nil
}

// NormAxis maps a possibly negative axis into [0, rank) and checks it.
func NormAxis(axis int64, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, fmt.Errorf("%w: axis %d out of range for rank %d", ErrShape, axis, rank)
	}
	return int(a), nil
}
