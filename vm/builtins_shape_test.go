package vm

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestShapeEval(t *testing.T) {
	// [2*b*s + 1, b, 7] with b = 3, s = 5
	prog := EncodeShapeProgram(tensor.Int64, []int64{3}, []ShapePoly{
		{C: 1, Terms: []ShapeTerm{{Coef: 2, Syms: []int{0, 1}}}},
		{Terms: []ShapeTerm{{Coef: 1, Syms: []int{0}}}},
		{C: 7},
	})
	out, err := shapeEval([]*tensor.Tensor{prog, tensor.Scalar(int64(3)), tensor.Scalar(int64(5))})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Int64s(); len(got) != 3 || got[0] != 31 || got[1] != 3 || got[2] != 7 {
		t.Fatalf("got %v, want [31 3 7]", got)
	}
	// a scalar of another integer type
	prog = EncodeShapeProgram(tensor.Int32, nil, []ShapePoly{{Terms: []ShapeTerm{{Coef: 4, Syms: []int{0}}}}})
	out, err = shapeEval([]*tensor.Tensor{prog, tensor.Scalar(int64(6))})
	if err != nil || out.DType != tensor.Int32 || len(out.Shape) != 0 || out.Int64s()[0] != 24 {
		t.Fatalf("scalar: got %v %v", out, err)
	}
	// an extent past 2^40 is a bad input
	prog = EncodeShapeProgram(tensor.Int64, []int64{1}, []ShapePoly{{Terms: []ShapeTerm{{Coef: 1, Syms: []int{0, 0}}}}})
	if _, err := shapeEval([]*tensor.Tensor{prog, tensor.Scalar(int64(1 << 30))}); !errors.Is(err, ErrInput) {
		t.Fatalf("huge extent: got %v, want ErrInput", err)
	}
}

// TestShapeEvalMalformed: every truncation or corruption of a program is an error, never
// a panic.
func TestShapeEvalMalformed(t *testing.T) {
	good := EncodeShapeProgram(tensor.Int64, []int64{2}, []ShapePoly{
		{C: 1, Terms: []ShapeTerm{{Coef: 2, Syms: []int{0, 1}}}},
		{Terms: []ShapeTerm{{Coef: 1, Syms: []int{1}}}},
	}).Int64s()
	syms := []*tensor.Tensor{tensor.Scalar(int64(3)), tensor.Scalar(int64(5))}
	for n := 0; n < len(good); n++ {
		p := tensor.MustFromSlice(tensor.Shape{n}, append([]int64{}, good[:n]...))
		if _, err := shapeEval(append([]*tensor.Tensor{p}, syms...)); err == nil {
			t.Errorf("a program cut to %d words evaluated", n)
		}
	}
	for i := range good {
		for _, v := range []int64{-1, 99, 1 << 40} {
			bad := append([]int64{}, good...)
			bad[i] = v
			p := tensor.MustFromSlice(tensor.Shape{len(bad)}, bad)
			shapeEval(append([]*tensor.Tensor{p}, syms...)) // must not panic
		}
	}
	if _, err := shapeEval([]*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{len(good)}, good), syms[0]}); err == nil {
		t.Error("a program reading a missing symbol evaluated")
	}
	if _, err := shapeExpect([]*tensor.Tensor{syms[0], syms[1]}); !errors.Is(err, ErrInput) {
		t.Errorf("shape.expect 3 vs 5: got %v, want ErrInput", err)
	}
	if _, err := shapeDim([]*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{2}, []int64{4, 9}), tensor.Scalar(int64(2))}); err == nil {
		t.Error("shape.dim past the rank evaluated")
	}
}

// TestShapeDerive: max(0, floor(num / div) + add) (a negative numerator is an input
// smaller than its window: no output); a divisor below 1 or a missing argument is an
// error, never a panic.
func TestShapeDerive(t *testing.T) {
	s := func(v int64) *tensor.Tensor { return tensor.Scalar(v) }
	for _, c := range []struct{ num, div, add, want int64 }{{7, 2, 1, 4}, {0, 2, 1, 1}, {8, 3, 0, 2}, {5, 1, 1, 6}, {-1, 2, 1, 0}, {-2, 3, 1, 0}, {-5, 2, 1, 0}, {-3, 3, 1, 0}} {
		out, err := shapeDerive([]*tensor.Tensor{s(c.num), s(c.div), s(c.add)})
		if err != nil || out.Int64s()[0] != c.want {
			t.Fatalf("max(0, floor(%d / %d) + %d): got %v, %v; want %d", c.num, c.div, c.add, out, err, c.want)
		}
	}
	for _, args := range [][]*tensor.Tensor{{s(4), s(0), s(1)}, {s(4), s(-2), s(1)}, {s(4), s(2)}, {s(4), s(2), s(1), s(1)}, {s(4), nil, s(1)}} {
		if _, err := shapeDerive(args); err == nil || errors.Is(err, ErrInput) {
			t.Fatalf("%v: got %v, want a malformed-call error", args, err)
		}
	}
}
