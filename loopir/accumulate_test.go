package loopir

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestEqualTellsVariablesByIdentity(t *testing.T) {
	i, i2 := NewVar("i"), NewVar("i") // print alike, differ
	if !Equal(Bin(Add, i, Int(1)), Bin(Add, i, Int(1))) {
		t.Error("equal trees compared unequal")
	}
	if Equal(Bin(Add, i, Int(1)), Bin(Add, i2, Int(1))) {
		t.Error("different variables with one name compared equal")
	}
	if Equal(Float(1, tensor.Float32), Float(1, tensor.Float64)) {
		t.Error("constants of different types compared equal")
	}
}

func TestMatchAccumulate(t *testing.T) {
	n := NewVar("n")
	acc := &Buffer{Name: "acc", DT: tensor.Float32, Shape: []Expr{n}}
	x := &Buffer{Name: "x", DT: tensor.Float32, Shape: []Expr{n, n}}
	i, j, r := NewVar("i"), NewVar("j"), NewVar("r")
	self := &Load{Buf: acc, Index: []Expr{i}}
	src := &Load{Buf: x, Index: []Expr{i, r}}
	cases := []struct {
		name string
		st   Stmt
		op   BinOp
		ok   bool
	}{
		{"sum", &Store{Buf: acc, Index: []Expr{i}, Value: &Binary{Op: Add, A: self, B: src}}, Add, true},
		{"max, accumulator second", Seq{&Store{Buf: acc, Index: []Expr{i}, Value: &Binary{Op: Max, A: src, B: self}}}, Max, true},
		{"product", &Store{Buf: acc, Index: []Expr{i}, Value: &Binary{Op: Mul, A: self, B: src}}, 0, false},
		{"other element", &Store{Buf: acc, Index: []Expr{j}, Value: &Binary{Op: Add, A: self, B: src}}, 0, false},
		{"operand reads the accumulator", &Store{Buf: acc, Index: []Expr{i}, Value: &Binary{Op: Add, A: self, B: &Load{Buf: acc, Index: []Expr{j}}}}, 0, false},
		{"two statements", Seq{&Store{Buf: acc, Index: []Expr{i}, Value: &Binary{Op: Add, A: self, B: src}}, &Store{Buf: acc, Index: []Expr{j}, Value: src}}, 0, false},
	}
	for _, c := range cases {
		a, ok := MatchAccumulate(c.st)
		if ok != c.ok || (ok && (a.Op != c.op || a.Operand != src)) {
			t.Errorf("%s: got %+v, %v", c.name, a, ok)
		}
	}
}
