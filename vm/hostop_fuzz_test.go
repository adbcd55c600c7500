package vm

import (
	"bytes"
	"errors"
	"testing"
)

// sampleHostCall is sampleConsts with a host call of every attribute kind and slots.
func sampleHostCall() *Executable {
	x := sampleConsts()
	f := &x.Functions[0]
	f.Regs++
	f.Code = append([]Instr{{Op: CallHost, Dst: Reg(f.Regs - 1), Args: []Reg{0}, Str: "node"}}, f.Code...)
	x.HostCalls = []HostCall{{Op: "Op", Slots: []int{2}, Attrs: HostAttrs{
		{Name: "f", Kind: AttrFloats, Floats: []float64{0.5, -1}},
		{Name: "i", Kind: AttrInts, Ints: []int64{-3}},
		{Name: "s", Kind: AttrStrings, Strings: []string{"a", ""}},
	}}}
	return x
}

// FuzzDecodeHostCalls fuzzes the host call section behind a valid header: a payload
// decodes with ErrFormat or re-encodes to the same bytes.
func FuzzDecodeHostCalls(f *testing.F) {
	good, err := sampleHostCall().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	h, _ := parseHeader(good)
	f.Add(good[HeaderSize:h.metaEnd], good[h.dataOff:])
	f.Fuzz(func(t *testing.T, payload, data []byte) {
		x, err := Decode(split(payload, data), data, nil)
		if err != nil {
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
		if twice, _ := y.MarshalBinary(); !bytes.Equal(once, twice) {
			t.Fatal("encoding is not stable")
		}
	})
}
