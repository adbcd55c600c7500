package compiler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// sequenceModule builds a sequence from two tensors, reads an item at a position given
// by a request, runs a kernel on it, appends the result, and returns the concatenation,
// the length, the sequence and an optional of the kernel's result.
func sequenceModule(t *testing.T) *graph.Module {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[4], %y: f32[4], %pos: i64[]) {
  %s = SequenceConstruct(%x, %y) : seq<f32[4]>
  %t = SequenceAt(%s, %pos) : f32[4]
  %u = Exp(%t) : f32[4]
  %s2 = SequenceInsert(%s, %u) : seq<f32[4]>
  %n = SequenceLength(%s2) : i64[]
  %c = ConcatFromSequence(%s2) {axis=0} : f32[12]
  %o = Optional(%u) : opt<f32[4]>
  return %c, %n, %s2, %o
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSequencesRunAsVMValuesAndMatchReference: the sequence ops run as VM builtins
// between kernels, the entry returns a sequence and an optional (after a marshal round
// trip of the executable), the results match the reference evaluator, and a position
// out of range is ErrInput naming the node.
func TestSequencesRunAsVMValuesAndMatchReference(t *testing.T) {
	m := sequenceModule(t)
	dev := openCPU(t)
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if k := res.Exe.Outputs[2].Kind; k != vm.IOSequence || res.Exe.Outputs[3].Kind != vm.IOOptional {
		t.Fatalf("output kinds %v, %v; want seq, opt", k, res.Exe.Outputs[3].Kind)
	}
	blob, err := res.Exe.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var exe vm.Executable
	if err := exe.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(&exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	x, y := f32(1, 4), f32(2, 4)
	for _, pos := range []int64{0, 1, -1} {
		in := []any{x, y, tensor.Scalar(pos)}
		got, err := machine.RunValues(context.Background(), in)
		if err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		want, err := ref.Eval(m, map[string]ref.Value{"x": x, "y": y, "pos": tensor.Scalar(pos)}, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		nodetest.CloseTensor(t, "c", got[0].(*tensor.Tensor), want[0].(*tensor.Tensor))
		nodetest.CloseTensor(t, "n", got[1].(*tensor.Tensor), want[1].(*tensor.Tensor))
		seq, wantSeq := got[2].(*vm.SeqValue), want[2].(*ref.Sequence)
		if len(seq.Items) != len(wantSeq.Items) {
			t.Fatalf("position %d: %d items, want %d", pos, len(seq.Items), len(wantSeq.Items))
		}
		for i := range seq.Items {
			nodetest.CloseTensor(t, "s2", seq.Items[i], wantSeq.Items[i])
		}
		opt := got[3].(*vm.OptValue)
		nodetest.CloseTensor(t, "o", opt.V.(*tensor.Tensor), want[3].(*ref.Optional).V.(*tensor.Tensor))
	}
	_, err = machine.RunValues(context.Background(), []any{x, y, tensor.Scalar(int64(2))})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "SequenceAt") {
		t.Fatalf("position 2 of 2 items: %v, want ErrInput naming SequenceAt", err)
	}
}

// TestSequenceMapRunsItsBodyPerItem: SequenceMap over two sequences of items of
// different lengths runs its body (a kernel over the item's symbolic extent) once per
// position and matches the reference; sequences of different lengths are ErrInput.
func TestSequenceMapRunsItsBodyPerItem(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%a: seq<f32[n]>, %b: seq<f32[n]>) {
  %r = SequenceMap(%a, %b) : seq<f32[n]>
    body =
      func @body(%x: f32[n], %y: f32[n]) {
        %z = Add(%x, %y) : f32[n]
        return %z
      }
  return %r
}`)
	if err != nil {
		t.Fatal(err)
	}
	dev := openCPU(t)
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	a := &ref.Sequence{Elem: tensor.Float32, Items: []*tensor.Tensor{f32(1, 3), f32(2, 5), f32(3, 1)}}
	b := &ref.Sequence{Elem: tensor.Float32, Items: []*tensor.Tensor{f32(4, 3), f32(5, 5), f32(6, 1)}}
	got, err := machine.RunValues(context.Background(), []any{&vm.SeqValue{Elem: a.Elem, Items: a.Items}, &vm.SeqValue{Elem: b.Elem, Items: b.Items}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Eval(m, map[string]ref.Value{"a": a, "b": b}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gs, ws := got[0].(*vm.SeqValue), want[0].(*ref.Sequence)
	if len(gs.Items) != len(ws.Items) {
		t.Fatalf("%d items, want %d", len(gs.Items), len(ws.Items))
	}
	for i := range gs.Items {
		nodetest.CloseTensor(t, "r", gs.Items[i], ws.Items[i])
	}
	short := &vm.SeqValue{Elem: tensor.Float32, Items: a.Items[:2]}
	_, err = machine.RunValues(context.Background(), []any{short, &vm.SeqValue{Elem: b.Elem, Items: b.Items}})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "SequenceMap") || !strings.Contains(err.Error(), "lengths 2 and 3") {
		t.Fatalf("sequences of 2 and 3 items: %v, want ErrInput naming SequenceMap and the lengths", err)
	}
}
