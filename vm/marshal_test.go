package vm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// sample is a small executable using most opcodes: main(x) allocates an output, runs a
// kernel on x, loops twice through a builtin and returns a tuple.
func sample() *Executable {
	c := tensor.MustFromSlice(tensor.Shape{2, 2}, []float32{1, 2, 3, 4})
	return &Executable{
		Functions: []Function{
			{Name: "main", Params: 1, Regs: 8, Code: []Instr{
				{Op: AllocStorage, Dst: 1, Imm: 16, Device: 0},
				{Op: AllocTensor, Dst: 2, Args: []Reg{1}, DType: tensor.Float32, Shape: []int64{2, 2}},
				{Op: LoadConst, Dst: 3, Imm: 0},
				{Op: LoadConstInt, Dst: 4, Imm: 2},
				{Op: InvokeKernel, Args: []Reg{0, 3, 2}, In: 2, Dims: []Reg{4}, Imm: 0},
				{Op: CallBuiltin, Dst: 5, Args: []Reg{4}, Imm: 0},
				{Op: If, Args: []Reg{5}, Imm: 2},
				{Op: Goto, Imm: -2},
				{Op: Invoke, Dst: 6, Args: []Reg{2}, Imm: 1},
				{Op: AllocTuple, Dst: 7, Args: []Reg{6, 2}},
				{Op: KillRegister, Args: []Reg{1}},
				{Op: Ret, Args: []Reg{7}},
			}},
			{Name: "identity", Params: 1, Regs: 2, Code: []Instr{
				{Op: ShapeOf, Dst: 1, Args: []Reg{0}},
				{Op: ReshapeTensor, Dst: 1, Args: []Reg{0, 1}},
				{Op: Ret, Args: []Reg{1}},
			}},
			{Name: "unreachable", Params: 0, Regs: 0, Code: []Instr{{Op: Fatal, Str: "no such shape"}}},
		},
		Constants: []*tensor.Tensor{c},
		Kernels:   []KernelInfo{{Name: "add", Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: []KernelArg{{tensor.Float32, Extent{ExtDim, 0}}, {tensor.Float32, Extent{ExtDim, 0}}, {tensor.Float32, Extent{ExtDim, 0}}}}},
		Binaries:  []Binary{{Device: "cpu", Fingerprint: "cpu amd64 +avx2", Data: []byte("\x7fELF...")}},
		Builtins:  []string{"decrement"},
	}
}

func TestRoundTrip(t *testing.T) {
	data, err := sampleConsts().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var x Executable
	if err := x.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	again, err := x.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Error("re-encoding differs")
	}
	if x.Functions[0].Code[4].In != 2 || x.Constants[0].Shape[1] != 2 || x.Kernels[0].Dims[0] != "n" {
		t.Errorf("decoded executable differs: %+v", x)
	}
	for i, c := range sampleConsts().Constants {
		if got := x.Constants[i]; got.String() != c.String() || !got.Shape.Equal(c.Shape) || got.Check() != nil {
			t.Errorf("constant %d: got %v%v, want %v%v", i, got, got.Shape, c, c.Shape)
		}
	}
	if x.Mapped() {
		t.Error("UnmarshalBinary made constants alias its input")
	}
}

// sampleConsts is sample with constants of several element types, alignments and
// sizes (an empty one, a bool one that is always copied).
func sampleConsts() *Executable {
	x := sample()
	x.Constants = append(x.Constants,
		tensor.MustFromSlice(tensor.Shape{3}, []int64{-1, 1 << 40, 7}),
		tensor.MustFromSlice(tensor.Shape{3}, []bool{true, false, true}),
		tensor.MustFromSlice(tensor.Shape{5}, []uint8{1, 2, 3, 4, 5}),
		tensor.MustFromSlice(tensor.Shape{0, 4}, []float64{}),
		tensor.MustFromSlice(tensor.Shape{1}, []complex128{complex(1, -2)}),
		tensor.MustFromSlice(tensor.Shape{2, 1}, []tensor.Float16Bits{1, 2}),
	)
	return x
}

// v2File is a file in the layout of format 2 (24-byte header, constants inline).
func v2File() []byte {
	payload := []byte{0, 1, 4, 'm', 'a', 'i', 'n'}
	b := append([]byte{}, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, 2)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

// TestBadFilesAreErrors: foreign, truncated, corrupted and other-version files are typed
// errors, and the target executable stays untouched.
func TestBadFilesAreErrors(t *testing.T) {
	good, _ := sampleConsts().MarshalBinary()
	off, err := DataOffset(good)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":             {nil, ErrFormat},
		"foreign":           {[]byte("PK\x03\x04 this is a zip file, not an executable"), ErrFormat},
		"truncated data":    {good[:len(good)-5], ErrFormat},
		"truncated meta":    {good[:off-7], ErrFormat},
		"no data section":   {good[:off], ErrFormat},
		"padded":            {append(append([]byte{}, good...), 0), ErrFormat},
		"flipped data byte": {edit(func(b []byte) { b[len(b)-3] ^= 0x40 }), ErrFormat},
		"flipped meta byte": {edit(func(b []byte) { b[HeaderSize+5] ^= 0x40 }), ErrFormat},
		"meta padding":      {edit(func(b []byte) { b[off-1] = 1 }), ErrFormat},
		"data offset":       {edit(func(b []byte) { b[24] += DataAlign }), ErrFormat},
		"reserved":          {edit(func(b []byte) { b[45] = 1 }), ErrFormat},
		"newer format":      {edit(func(b []byte) { b[8] = 99 }), ErrVersion},
		"format 2":          {v2File(), ErrVersion},
		"format 2 header":   {v2File()[:12], ErrVersion},
		"header only":       {good[:HeaderSize], ErrFormat},
		"short header":      {good[:HeaderSize-1], ErrFormat},
		"bad meta crc":      {edit(func(b []byte) { copy(b[12:], "\x01\x02\x03\x04") }), ErrFormat},
		"bad data crc":      {edit(func(b []byte) { copy(b[40:], "\x01\x02\x03\x04") }), ErrFormat},
	}
	for name, c := range cases {
		x := Executable{Entry: 7}
		err := x.UnmarshalBinary(c.data)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		if x.Entry != 7 || x.Functions != nil {
			t.Errorf("%s: the executable changed on error", name)
		}
		if o, err := DataOffset(c.data); err == nil && int64(len(c.data)) >= o {
			_, err = Decode(c.data[:o], c.data[o:], nil)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: Decode: got %v, want %v", name, err, c.want)
			}
		} else if err != nil && !errors.Is(err, c.want) && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: DataOffset: untyped error %v", name, err)
		}
	}
	if _, err := DataOffset(v2File()); !errors.Is(err, ErrVersion) {
		t.Errorf("DataOffset of a format 2 file: %v", err)
	}
}

// TestVerifyRejectsBrokenReferences: executables that decode but point outside their
// tables are rejected on both sides (MarshalBinary refuses to write them; a file holding
// one — written by a buggy or hostile producer — fails to load).
func TestVerifyRejectsBrokenReferences(t *testing.T) {
	breakers := map[string]func(x *Executable){
		"register outside the frame": func(x *Executable) { x.Functions[0].Code[0].Dst = 8 },
		"jump past the end":          func(x *Executable) { x.Functions[0].Code[7].Imm = 100 },
		"unknown function":           func(x *Executable) { x.Functions[0].Code[8].Imm = 9 },
		"wrong argument count":       func(x *Executable) { x.Functions[0].Code[8].Args = nil },
		"kernel arity":               func(x *Executable) { x.Functions[0].Code[4].In = 1 },
		"kernel dims":                func(x *Executable) { x.Functions[0].Code[4].Dims = nil },
		"unknown constant":           func(x *Executable) { x.Functions[0].Code[2].Imm = int64(len(x.Constants)) },
		"kernel in a missing binary": func(x *Executable) { x.Kernels[0].Binary = 3 },
		"unknown builtin":            func(x *Executable) { x.Functions[0].Code[5].Imm = -1 },
		"bad element type":           func(x *Executable) { x.Functions[0].Code[1].DType = 200 },
		"unknown opcode":             func(x *Executable) { x.Functions[1].Code[0].Op = 250 },
		"entry":                      func(x *Executable) { x.Entry = 3 },
	}
	for name, brk := range breakers {
		x := sample()
		brk(x)
		if _, err := x.MarshalBinary(); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: MarshalBinary: got %v, want ErrFormat", name, err)
		}
		data, err := x.encode()
		if err != nil {
			t.Fatal(err)
		}
		var y Executable
		if err := y.UnmarshalBinary(data); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: UnmarshalBinary: got %v, want ErrFormat", name, err)
		}
	}
}
