package compilecache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func sampleRecords() []*record {
	m := testMaterial("model-digest", "compiler-id")
	return []*record{
		{typ: recPut, key: m.Key(), time: 1700000000123456789, blob: Digest{1, 2, 3}, size: 12345, stored: 6789, label: "resnet18", mat: m},
		{typ: recUse, key: m.Key(), time: 1700000000999999999},
		{typ: recDrop, key: m.Key(), time: 1700000001000000000, reason: "quarantined: checksum"},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var b []byte
	for _, r := range sampleRecords() {
		b = append(b, r.frame()...)
	}
	recs, good, damaged := parseRecords(b)
	if damaged != nil || good != len(b) || len(recs) != 3 {
		t.Fatalf("parsed %d records, %d of %d bytes: %v", len(recs), good, len(b), damaged)
	}
	for i, r := range recs {
		if !bytes.Equal(r.frame(), sampleRecords()[i].frame()) {
			t.Fatalf("record %d does not re-encode", i)
		}
	}
	if v, _ := recs[0].mat.Get("compiler"); v != "compiler-id" || recs[0].label != "resnet18" {
		t.Fatalf("put record: %+v", recs[0])
	}
	// every cut inside the last record stops before it
	last := len(b) - len(sampleRecords()[2].frame())
	for cut := last + 1; cut < len(b); cut++ {
		recs, good, damaged := parseRecords(b[:cut])
		if len(recs) != 2 || good != last || damaged == nil {
			t.Fatalf("cut %d: %d records, good %d, %v", cut, len(recs), good, damaged)
		}
	}
}

// FuzzParseRecords: arbitrary bytes never panic, the good prefix re-parses to the same
// records, and each re-encodes to its own bytes.
func FuzzParseRecords(f *testing.F) {
	var b []byte
	for _, r := range sampleRecords() {
		b = append(b, r.frame()...)
		f.Add(bytes.Clone(b))
	}
	f.Add([]byte{})
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, good, damaged := parseRecords(data)
		if good > len(data) || (damaged == nil) != (good == len(data)) {
			t.Fatalf("good %d of %d, damaged %v", good, len(data), damaged)
		}
		off := 0
		for _, r := range recs {
			fr := r.frame()
			if !bytes.Equal(fr, data[off:off+len(fr)]) {
				t.Fatalf("record at %d does not re-encode", off)
			}
			off += len(fr)
		}
		if off != good {
			t.Fatalf("records cover %d bytes, good says %d", off, good)
		}
	})
}

// FuzzBlobHeader: arbitrary headers never panic and accepted ones are consistent.
func FuzzBlobHeader(f *testing.F) {
	h := blobHeader{size: 100, head: 100, zlen: 20}
	f.Add(h.encode(), int64(blobHeaderSize+20))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		got, err := decodeBlobHeader(b, size)
		if err == nil && (got.head > got.size || blobHeaderSize+got.zlen > size) {
			t.Fatalf("accepted inconsistent header %+v for %d bytes", got, size)
		}
	})
}

// FuzzOpenJournal: any journal file opens (damage is truncated or reset, never fatal)
// and takes a new entry afterwards.
func FuzzOpenJournal(f *testing.F) {
	var b []byte
	b = append(b, journalHeader()...)
	for _, r := range sampleRecords() {
		b = append(b, r.frame()...)
	}
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte("KILNJRNL"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "journal"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer j.Close()
		m := testMaterial("after", "fuzz")
		if err := j.Put(m, "x", []byte("y"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Get(m); err != nil {
			t.Fatal(err)
		}
	})
}
