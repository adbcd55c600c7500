package codegen

import (
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

func TestIterationWorkCountsStoresAndTheirOperandsUnderConstantLoopsAndGivesUpOnSymbolicOnes(t *testing.T) {
	buf := &loopir.Buffer{Name: "b", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(1 << 20)}}
	store := &loopir.Store{Buf: buf, Index: []loopir.Expr{loopir.Int(0)}, Value: loopir.Float(1, tensor.Float32)}
	loop := func(ext loopir.Expr, body loopir.Stmt) loopir.Stmt {
		return &loopir.For{Var: loopir.NewVar("i"), Min: loopir.Int(0), Extent: ext, Body: body}
	}
	load := &loopir.Load{Buf: buf, Index: []loopir.Expr{loopir.Int(1)}}
	n := loopir.NewVar("n")
	cases := []struct {
		name string
		body loopir.Stmt
		work int64
		ok   bool
	}{
		{"one store", store, 1, true},
		{"a store of two loads and an exp", &loopir.Store{Buf: buf, Index: []loopir.Expr{loopir.Int(0)}, Value: &loopir.Call{Fn: loopir.Exp, Args: []loopir.Expr{loopir.Bin(loopir.Add, load, load)}}}, 3 + callWork, true},
		{"16x8 stores and one more", loopir.Seq{loop(loopir.Int(16), loop(loopir.Int(8), store)), store}, 129, true},
		{"if: the larger branch", &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, n, loopir.Int(3)), Then: loop(loopir.Int(4), store), Else: store}, 4, true},
		{"a symbolic extent", loop(n, store), 0, false},
		{"at the limit", loop(loopir.Int(serialWork), store), 0, false},
		{"an intrinsic call", &loopir.IntrinCall{}, intrinWork, true},
	}
	for _, c := range cases {
		w, ok := iterationWork(c.body, serialWork)
		if ok != c.ok || ok && w != c.work {
			t.Errorf("%s: work %d ok %v, want %d %v", c.name, w, ok, c.work, c.ok)
		}
	}
}
