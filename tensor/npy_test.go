package tensor

import (
	"bytes"
	"errors"
	"testing"
)

func TestNpyRoundTrip(t *testing.T) {
	cases := []*Tensor{
		MustFromSlice(Shape{2, 3}, []float32{1, 2, 3, 4, 5, -6}),
		MustFromSlice(Shape{3}, []int64{-1, 0, 1 << 60}),
		MustFromSlice(Shape{}, []float64{3.25}),
		MustFromSlice(Shape{2}, []bool{true, false}),
		MustFromSlice(Shape{2, 1}, []uint8{7, 255}),
		MustFromSlice(Shape{1}, []Float16Bits{F32ToF16(0.5)}),
	}
	for _, c := range cases {
		var buf bytes.Buffer
		if err := WriteNpy(&buf, c); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if (buf.Len()-int(c.Len())*c.DType.Size())%64 != 0 {
			t.Errorf("%v: header not 64-byte aligned", c)
		}
		back, err := ReadNpy(buf.Bytes(), 0)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if back.String() != c.String() || !back.Shape.Equal(c.Shape) {
			t.Errorf("round trip %v -> %v", c, back)
		}
	}
}

func TestNpyBigEndianAndErrors(t *testing.T) {
	hdr := "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), 0)
	b = append(append(b, hdr...), 0, 0, 0, 1, 0, 0, 1, 0)
	got, err := ReadNpy(b, 0)
	if err != nil || got.Data.([]int32)[0] != 1 || got.Data.([]int32)[1] != 256 {
		t.Fatalf("big endian: %v %v", got, err)
	}
	bad := map[string][]byte{
		"magic":   []byte("NOTNUMPY.........."),
		"fortran": npyWith("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4),
		"descr":   npyWith("{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }", 16),
		"short":   npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 4),
		"huge":    npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000,), }", 4),
	}
	for name, data := range bad {
		if _, err := ReadNpy(data, 1<<30); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrShape) && !errors.Is(err, ErrDType) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: untyped error %v", name, err)
		}
	}
}

func npyWith(hdr string, dataBytes int) []byte {
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), 0)
	return append(append(b, hdr...), make([]byte, dataBytes)...)
}

func FuzzReadNpy(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteNpy(&buf, MustFromSlice(Shape{2, 2}, []float32{1, 2, 3, 4}))
	f.Add(buf.Bytes())
	f.Add(npyWith("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 0), }", 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		tt, err := ReadNpy(b, 1<<20)
		if err == nil {
			if cerr := tt.Check(); cerr != nil {
				t.Fatalf("decoded tensor breaks invariants: %v", cerr)
			}
		}
	})
}
