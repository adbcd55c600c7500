package vm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func FuzzUnmarshal(f *testing.F) {
	good, _ := sampleConsts().MarshalBinary()
	f.Add(good)
	f.Add(good[:HeaderSize+3])
	f.Add([]byte("KILNEXE\x00"))
	f.Add(v2File())
	withLaunch, _ := sampleLaunch().MarshalBinary()
	f.Add(withLaunch)
	seq := sampleConsts()
	seq.Inputs = []IOInfo{{Name: "s", Kind: IOSequence, DType: tensor.Float32, Shape: []int64{-1, 4}}}
	seq.Outputs = []IOInfo{{Name: "o", Kind: IOOptSequence, DType: tensor.Float32, UnknownRank: true}}
	withSeq, err := seq.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withSeq)
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
		off, err := DataOffset(data)
		if err != nil {
			t.Fatalf("DataOffset of a decodable file: %v", err)
		}
		y, err := Decode(data[:off], data[off:], nil)
		if err != nil {
			t.Fatalf("Decode fails where UnmarshalBinary succeeds: %v", err)
		}
		if again, _ := y.MarshalBinary(); !bytes.Equal(again, data) {
			t.Fatal("Decode's executable re-encodes differently")
		}
	})
}

// split is a valid header around a metadata payload and a data section (a checksum
// would stop almost every mutation before the decoder sees it).
func split(payload, data []byte) (meta []byte) {
	le := binary.LittleEndian
	meta = make([]byte, alignUp(HeaderSize+int64(len(payload))))
	copy(meta, magic[:])
	le.PutUint32(meta[8:], FormatVersion)
	le.PutUint32(meta[12:], crc32.Checksum(payload, castagnoli))
	le.PutUint64(meta[16:], uint64(len(payload)))
	le.PutUint64(meta[24:], uint64(len(meta)))
	le.PutUint64(meta[32:], uint64(len(data)))
	le.PutUint32(meta[40:], crc32.Checksum(data, castagnoli))
	copy(meta[HeaderSize:], payload)
	return meta
}

// FuzzDecodePayload fuzzes the metadata decoder and the constant layout behind a valid
// header, decoding with aliasing (Decode) from aligned and misaligned data; a decoded
// executable must re-encode to bytes that decode to the same encoding again.
func FuzzDecodePayload(f *testing.F) {
	good, _ := sampleConsts().MarshalBinary()
	h, _ := parseHeader(good)
	f.Add(good[HeaderSize:h.metaEnd], good[h.dataOff:])
	f.Add(good[HeaderSize:h.metaEnd], good[h.dataOff:len(good)-1])
	withLaunch, _ := sampleLaunch().MarshalBinary()
	hl, _ := parseHeader(withLaunch)
	f.Add(withLaunch[HeaderSize:hl.metaEnd], withLaunch[hl.dataOff:])
	f.Fuzz(func(t *testing.T, payload, data []byte) {
		meta := split(payload, data)
		x, err := Decode(meta, data, nil)
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
		shifted := make([]byte, len(data)+1)[1:]
		copy(shifted, data)
		z, err := Decode(meta, shifted, nil)
		if err != nil {
			t.Fatalf("misaligned data: %v", err)
		}
		var y Executable
		if err := y.UnmarshalBinary(once); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		twice, _ := y.MarshalBinary()
		copied, _ := z.MarshalBinary()
		if !bytes.Equal(once, twice) || !bytes.Equal(once, copied) {
			t.Fatal("encoding is not stable")
		}
	})
}
