package vm

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestExtentEvaluation: extent programs evaluate with floor division and checked
// arithmetic; malformed programs fail check, and overflow or division by zero is an
// error, not a wrapped value.
func TestExtentEvaluation(t *testing.T) {
	// (d0 - 3) / 2 + 1, floor: d0 = 0 gives -1
	conv := Extent{ExtDim, 0, ExtConst, 3, ExtSub, ExtConst, 2, ExtDiv, ExtConst, 1, ExtAdd}
	for d, want := range map[int64]int64{0: -1, 3: 1, 4: 1, 5: 2, 224: 111} {
		if got, err := conv.Eval([]int64{d}); err != nil || got != want {
			t.Errorf("conv extent at %d: %d, %v; want %d", d, got, err, want)
		}
	}
	if c, err := conv.check(1); err != nil || c {
		t.Errorf("check: constant %v, %v", c, err)
	}
	if got, _ := (Extent{ExtConst, -7, ExtConst, 2, ExtMod}).Eval(nil); got != 1 {
		t.Errorf("-7 mod 2 = %d, want 1", got)
	}
	sq := Extent{ExtDim, 0, ExtDim, 0, ExtMul}
	if _, err := sq.Eval([]int64{1 << 32}); !errors.Is(err, tensor.ErrTooLarge) {
		t.Errorf("2^64: %v", err)
	}
	if _, err := (Extent{ExtConst, 1, ExtDim, 0, ExtDiv}).Eval([]int64{0}); err == nil {
		t.Error("a division by zero evaluated")
	}
	for _, bad := range []Extent{{}, {ExtAdd}, {ExtConst}, {ExtConst, 1, ExtConst, 2}, {ExtDim, 1}, {99, 1}} {
		if _, err := bad.check(1); err == nil {
			t.Errorf("%v passed check", bad)
		}
	}
	if b := (KernelArg{DType: tensor.Float32, Elements: ConstExtent(10)}).constBytes(); b != 40 {
		t.Errorf("constant bytes %d, want 40", b)
	}
	if b := (KernelArg{DType: tensor.Float32, Elements: Extent{ExtDim, 0}}).constBytes(); b != -1 {
		t.Errorf("a dim-dependent extent has constant bytes %d", b)
	}
}
