package loopir

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func texParam(name string, dt tensor.DType, lanes int64) *Buffer {
	return &Buffer{Name: name, DT: dt, Scope: ScopeTexture,
		Shape: []Expr{Int(1), Int(2), Int(3), Int(5), Int(lanes)}}
}

func TestVerifyRefusesInvalidTextureAccesses(t *testing.T) {
	x, y := texParam("x", tensor.Float32, 4), texParam("y", tensor.Float32, 4)
	g := &Buffer{Name: "g", DT: tensor.Float32, Shape: []Expr{Int(4)}}
	read := &TexRead{Buf: x, X: Int(0), Y: Int(0), Lane: Int(1)}
	write := func(b *Buffer, v Expr) *TexWrite {
		return &TexWrite{Buf: b, X: Int(0), Y: Int(0), Value: [4]Expr{v, v, v, v}}
	}
	good := &PrimFunc{Name: "copy", Params: []*Buffer{x, y}, Body: write(y, read)}
	if err := Verify(good); err != nil {
		t.Fatalf("valid texel copy rejected: %v", err)
	}
	bad := map[string]*PrimFunc{
		"texture read and written": {Name: "f", Params: []*Buffer{x, y},
			Body: write(x, read)},
		"texture read and stored": {Name: "f", Params: []*Buffer{x},
			Body: &Store{Buf: x, Index: []Expr{Int(0), Int(0), Int(0), Int(0), Int(0)}, Value: read}},
		"texture of int32":       {Name: "f", Params: []*Buffer{texParam("i", tensor.Int32, 4)}, Body: Seq{}},
		"texture lane axis of 3": {Name: "f", Params: []*Buffer{texParam("z", tensor.Float32, 3)}, Body: Seq{}},
		"texel read of a global buffer": {Name: "f", Params: []*Buffer{g, y},
			Body: write(y, &TexRead{Buf: g, X: Int(0), Y: Int(0), Lane: Int(0)})},
		"flat index into a texture": {Name: "f", Params: []*Buffer{x, g},
			Body: &Store{Buf: g, Index: []Expr{Int(0)}, Value: &Load{Buf: x, Index: []Expr{Int(0)}}}},
	}
	for name, f := range bad {
		if err := Verify(f); !errors.Is(err, ErrVerify) {
			t.Errorf("%s: got %v, want ErrVerify", name, err)
		}
	}
}

func TestTexelOfFollowsEachPacking(t *testing.T) {
	n, c, h, w, l := NewVar("n"), NewVar("c"), NewVar("h"), NewVar("w"), NewVar("l")
	for _, tc := range []struct {
		p    Packing
		want string
	}{
		{PackNCHW4c, "w ((((n * 2) + c) * 3) + h) l"},
		{PackOIHW4o, "((((c * 3) + h) * 5) + w) n l"},
		{PackNHWC4c, "((h * 5) + w) ((n * 2) + c) l"},
	} {
		b := texParam("t", tensor.Float32, 4)
		b.Packing = tc.p
		x, y, lane := TexelOf(b, []Expr{n, c, h, w, l})
		if got := strings.Join([]string{ExprString(x), ExprString(y), ExprString(lane)}, " "); got != tc.want {
			t.Errorf("%v: texel %s, want %s", tc.p, got, tc.want)
		}
	}
}
