package loopir

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestVerify(t *testing.T) {
	n := NewVar("n")
	x := &Buffer{Name: "x", DT: tensor.Float32, Shape: []Expr{n}}
	i := NewVar("i")
	good := &PrimFunc{Name: "copy", Params: []*Buffer{x}, Dims: []*Var{n},
		Body: &For{Var: i, Min: Int(0), Extent: n, Body: &Store{Buf: x, Index: []Expr{i}, Value: &Load{Buf: x, Index: []Expr{i}}}}}
	if err := Verify(good); err != nil {
		t.Fatalf("valid function rejected: %v", err)
	}
	stray := NewVar("j")
	other := &Buffer{Name: "y", DT: tensor.Float32, Shape: []Expr{n}}
	bad := map[string]*PrimFunc{
		"unbound var": {Name: "f", Params: []*Buffer{x}, Dims: []*Var{n},
			Body: &Store{Buf: x, Index: []Expr{stray}, Value: Float(0, tensor.Float32)}},
		"foreign buffer": {Name: "f", Params: []*Buffer{x}, Dims: []*Var{n},
			Body: &For{Var: i, Min: Int(0), Extent: n, Body: &Store{Buf: other, Index: []Expr{i}, Value: Float(0, tensor.Float32)}}},
		"rebound loop var": {Name: "f", Params: []*Buffer{x}, Dims: []*Var{n},
			Body: &For{Var: i, Min: Int(0), Extent: n, Body: &For{Var: i, Min: Int(0), Extent: n, Body: Seq{}}}},
		"rank mismatch": {Name: "f", Params: []*Buffer{{Name: "m", DT: tensor.Float32, Shape: []Expr{n, n, n}}}, Dims: []*Var{n},
			Body: &Store{Buf: &Buffer{Name: "m"}, Index: []Expr{Int(0), Int(0)}, Value: Float(0, tensor.Float32)}},
		"loop var used outside": {Name: "f", Params: []*Buffer{x}, Dims: []*Var{n},
			Body: Seq{&For{Var: i, Min: Int(0), Extent: n, Body: Seq{}}, &Store{Buf: x, Index: []Expr{i}, Value: Float(0, tensor.Float32)}}},
	}
	for name, f := range bad {
		if err := Verify(f); !errors.Is(err, ErrVerify) {
			t.Errorf("%s: got %v, want ErrVerify", name, err)
		}
	}
}
