package vm_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// seqProgram is main(s: seq<f32[?]>, t: f32[?], pos: i64[]): it inserts t at pos,
// reads item pos back and returns (the new sequence, the item, its length, the
// concatenation along axis 0, an optional holding the sequence).
func seqProgram() *vm.Executable {
	b := []string{vm.BuiltinSeqInsert, vm.BuiltinSeqAt, vm.BuiltinSeqLength, vm.BuiltinSeqConcat, vm.BuiltinOptSome}
	at := func(name string) int64 {
		for i, n := range b {
			if n == name {
				return int64(i)
			}
		}
		panic("no builtin " + name)
	}
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 3, Regs: 12, Code: []vm.Instr{
			{Op: vm.CallBuiltin, Dst: 3, Args: []vm.Reg{0, 1, 2}, Imm: at(vm.BuiltinSeqInsert), Str: "SequenceInsert(ins)"},
			{Op: vm.CallBuiltin, Dst: 4, Args: []vm.Reg{3, 2}, Imm: at(vm.BuiltinSeqAt), Str: "SequenceAt(at)"},
			{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{3}, Imm: at(vm.BuiltinSeqLength)},
			{Op: vm.LoadConstInt, Dst: 6, Imm: 0},
			{Op: vm.CallBuiltin, Dst: 7, Args: []vm.Reg{3, 6, 6}, Imm: at(vm.BuiltinSeqConcat), Str: "ConcatFromSequence(cat)"},
			{Op: vm.CallBuiltin, Dst: 8, Args: []vm.Reg{3}, Imm: at(vm.BuiltinOptSome)},
			{Op: vm.AllocTuple, Dst: 9, Args: []vm.Reg{3, 4, 5, 7, 8}},
			{Op: vm.Ret, Args: []vm.Reg{9}},
		}}},
		Builtins: b,
		Inputs: []vm.IOInfo{
			{Name: "s", Kind: vm.IOSequence, DType: tensor.Float32, Shape: []int64{-1}},
			{Name: "t", DType: tensor.Float32, Shape: []int64{-1}},
			{Name: "pos", DType: tensor.Int64},
		},
		Outputs: []vm.IOInfo{
			{Name: "seq", Kind: vm.IOSequence, DType: tensor.Float32, Shape: []int64{-1}},
			{Name: "item", DType: tensor.Float32, Shape: []int64{-1}},
			{Name: "len", DType: tensor.Int64},
			{Name: "cat", DType: tensor.Float32, Shape: []int64{-1}},
			{Name: "opt", Kind: vm.IOOptSequence, DType: tensor.Float32, UnknownRank: true},
		},
	}
}

func vecF32(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

func loadSeq(t *testing.T) *vm.VM {
	t.Helper()
	m, err := vm.Load(seqProgram(), []devices.Device{openCPU(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestSequenceBuiltinsInsertReadAndConcatenate(t *testing.T) {
	m := loadSeq(t)
	s := &vm.SeqValue{Elem: tensor.Float32, Items: []*tensor.Tensor{vecF32(1, 2), vecF32(3)}}
	out, err := m.RunValues(context.Background(), []any{s, vecF32(9, 9, 9), tensor.Scalar(int64(-1))})
	if err != nil {
		t.Fatal(err)
	}
	seq := out[0].(*vm.SeqValue)
	var lens []int
	for _, it := range seq.Items {
		lens = append(lens, it.Len())
	}
	if !reflect.DeepEqual(lens, []int{2, 3, 1}) {
		t.Errorf("items of lengths %v, want [2 3 1] (inserted before the last)", lens)
	}
	if got := out[1].(*tensor.Tensor).Data.([]float32); !reflect.DeepEqual(got, []float32{3}) {
		t.Errorf("item -1 is %v, want [3]", got)
	}
	if got := out[2].(*tensor.Tensor).Int64s()[0]; got != 3 {
		t.Errorf("length %d, want 3", got)
	}
	if got := out[3].(*tensor.Tensor).Data.([]float32); !reflect.DeepEqual(got, []float32{1, 2, 9, 9, 9, 3}) {
		t.Errorf("concatenation %v", got)
	}
	if o := out[4].(*vm.OptValue); o.V == nil || len(o.V.(*vm.SeqValue).Items) != 3 {
		t.Errorf("optional %#v, want the 3-item sequence", o)
	}
	if _, err := m.Run(context.Background(), []*tensor.Tensor{vecF32(1), vecF32(1), tensor.Scalar(int64(0))}); !errors.Is(err, vm.ErrInput) {
		t.Errorf("Run with a tensor for a sequence input: %v, want ErrInput", err)
	}
}

func TestSequencePositionOutOfRangeIsInputError(t *testing.T) {
	m := loadSeq(t)
	s := &vm.SeqValue{Elem: tensor.Float32, Items: []*tensor.Tensor{vecF32(1)}}
	_, err := m.RunValues(context.Background(), []any{s, vecF32(2), tensor.Scalar(int64(5))})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "SequenceInsert(ins)") || !strings.Contains(err.Error(), "position 5") {
		t.Fatalf("insert at 5 into a 1-item sequence: %v, want ErrInput naming the node and the position", err)
	}
}

func TestSequenceInputWithMixedElementTypesIsRefused(t *testing.T) {
	m := loadSeq(t)
	s := &vm.SeqValue{Elem: tensor.Float32, Items: []*tensor.Tensor{vecF32(1), tensor.MustFromSlice(tensor.Shape{1}, []int64{2})}}
	_, err := m.RunValues(context.Background(), []any{s, vecF32(2), tensor.Scalar(int64(0))})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), `"s"`) {
		t.Fatalf("a sequence of f32 and i64 items: %v, want ErrInput naming input s", err)
	}
}

func TestSequenceSignatureRoundTrips(t *testing.T) {
	x := seqProgram()
	data, err := x.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var y vm.Executable
	if err := y.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Inputs, y.Inputs) || !reflect.DeepEqual(x.Outputs, y.Outputs) {
		t.Fatalf("signature after a round trip:\n%+v %+v\nwant\n%+v %+v", y.Inputs, y.Outputs, x.Inputs, x.Outputs)
	}
	if got := y.Outputs[4].TypeString(); got != "opt<seq<f32[*]>>" {
		t.Errorf("TypeString %q", got)
	}
}

func TestVerifyRefusesMalformedSequenceSignature(t *testing.T) {
	for name, io := range map[string]vm.IOInfo{
		"unknown kind":              {Name: "s", Kind: 9, DType: tensor.Float32},
		"tensor of unknown rank":    {Name: "s", DType: tensor.Float32, UnknownRank: true},
		"unknown rank with extents": {Name: "s", Kind: vm.IOSequence, DType: tensor.Float32, Shape: []int64{2}, UnknownRank: true},
		"bad extent":                {Name: "s", Kind: vm.IOSequence, DType: tensor.Float32, Shape: []int64{-7}},
	} {
		x := seqProgram()
		x.Inputs[0] = io
		if err := x.Verify(); !errors.Is(err, vm.ErrFormat) {
			t.Errorf("%s: Verify says %v, want ErrFormat", name, err)
		}
	}
}

func TestSequenceConcatStacksAlongANewAxis(t *testing.T) {
	x := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 4, Code: []vm.Instr{
			{Op: vm.LoadConstInt, Dst: 1, Imm: 1},
			{Op: vm.CallBuiltin, Dst: 2, Args: []vm.Reg{0, 1, 1}, Imm: 0, Str: "ConcatFromSequence(stack)"},
			{Op: vm.Ret, Args: []vm.Reg{2}},
		}}},
		Builtins: []string{vm.BuiltinSeqConcat},
	}
	m, err := vm.Load(x, []devices.Device{openCPU(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := tensor.MustFromSlice(tensor.Shape{2, 2}, []float32{1, 2, 3, 4})
	b := tensor.MustFromSlice(tensor.Shape{2, 2}, []float32{5, 6, 7, 8})
	out, err := m.RunValues(context.Background(), []any{&vm.SeqValue{Elem: tensor.Float32, Items: []*tensor.Tensor{a, b}}})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0].(*tensor.Tensor)
	if !reflect.DeepEqual([]int(got.Shape), []int{2, 2, 2}) || !reflect.DeepEqual(got.Data.([]float32), []float32{1, 2, 5, 6, 3, 4, 7, 8}) {
		t.Fatalf("stacked along axis 1: %v %v, want [2 2 2] [1 2 5 6 3 4 7 8]", got.Shape, got.Data)
	}
	c := tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{9, 9})
	_, err = m.RunValues(context.Background(), []any{&vm.SeqValue{Elem: tensor.Float32, Items: []*tensor.Tensor{a, c}}})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "ConcatFromSequence(stack)") {
		t.Fatalf("stacking [2,2] and [1,2]: %v, want ErrInput naming the node", err)
	}
}
