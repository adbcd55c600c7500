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
		Kernels:   []KernelInfo{{Name: "add", Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}}},
		Binaries:  []Binary{{Device: "cpu", Fingerprint: "cpu amd64 +avx2", Data: []byte("\x7fELF...")}},
		Builtins:  []string{"decrement"},
	}
}

func TestRoundTrip(t *testing.T) {
	data, err := sample().MarshalBinary()
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
}

// TestBadFilesAreErrors: foreign, truncated, corrupted and other-version files are typed
// errors, and the target executable stays untouched.
func TestBadFilesAreErrors(t *testing.T) {
	good, _ := sample().MarshalBinary()
	flip := append([]byte{}, good...)
	flip[len(flip)-3] ^= 0x40
	version := append([]byte{}, good...)
	version[8] = 99
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":          {nil, ErrFormat},
		"foreign":        {[]byte("PK\x03\x04 this is a zip file, not an executable"), ErrFormat},
		"truncated":      {good[:len(good)-5], ErrFormat},
		"padded":         {append(append([]byte{}, good...), 0), ErrFormat},
		"flipped byte":   {flip, ErrFormat},
		"newer format":   {version, ErrVersion},
		"header only":    {good[:headerSize], ErrFormat},
		"bad header crc": {append(append([]byte{}, good[:12]...), append([]byte{1, 2, 3, 4}, good[16:]...)...), ErrFormat},
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
		"unknown constant":           func(x *Executable) { x.Functions[0].Code[2].Imm = 1 },
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

func FuzzUnmarshal(f *testing.F) {
	good, _ := sample().MarshalBinary()
	f.Add(good)
	f.Add(good[:headerSize+3])
	f.Add([]byte("KILNEXE\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var x Executable
		if err := x.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		again, err := x.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded executable does not re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatal("re-encoding differs from the input")
		}
	})
}

// FuzzDecodePayload fuzzes the payload decoder behind a valid header (a checksum would
// stop almost every mutation before it); a decoded executable must re-encode to bytes
// that decode to the same encoding again.
func FuzzDecodePayload(f *testing.F) {
	good, _ := sample().MarshalBinary()
	f.Add(good[headerSize:])
	f.Fuzz(func(t *testing.T, payload []byte) {
		data := make([]byte, headerSize, headerSize+len(payload))
		copy(data, magic[:])
		binary.LittleEndian.PutUint32(data[8:], FormatVersion)
		binary.LittleEndian.PutUint32(data[12:], crc32.Checksum(payload, castagnoli))
		binary.LittleEndian.PutUint64(data[16:], uint64(len(payload)))
		data = append(data, payload...)
		var x Executable
		if err := x.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		once, err := x.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded executable does not re-encode: %v", err)
		}
		var y Executable
		if err := y.UnmarshalBinary(once); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		twice, _ := y.MarshalBinary()
		if !bytes.Equal(once, twice) {
			t.Fatal("encoding is not stable")
		}
	})
}
