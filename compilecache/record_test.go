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
	s := parseRecords(b)
	if s.tail != nil || len(s.skipped) != 0 || s.end != len(b) || len(s.recs) != 3 {
		t.Fatalf("parsed %d records, %d of %d bytes: %+v", len(s.recs), s.end, len(b), s)
	}
	for i, r := range s.recs {
		if !bytes.Equal(r.frame(), sampleRecords()[i].frame()) {
			t.Fatalf("record %d does not re-encode", i)
		}
	}
	if v, _ := s.recs[0].mat.Get("compiler"); v != "compiler-id" || s.recs[0].label != "resnet18" {
		t.Fatalf("put record: %+v", s.recs[0])
	}
	// every cut inside the last record stops before it, as a torn tail
	last := len(b) - len(sampleRecords()[2].frame())
	for cut := last + 1; cut < len(b); cut++ {
		s := parseRecords(b[:cut])
		if len(s.recs) != 2 || s.end != last || s.tail == nil || !s.tail.torn {
			t.Fatalf("cut %d: %d records, end %d, tail %+v", cut, len(s.recs), s.end, s.tail)
		}
	}
}

// FuzzParseRecords: arbitrary bytes never panic; every record re-encodes to the bytes at
// its offset, records do not overlap, the skipped runs and the tail cover the rest.
func FuzzParseRecords(f *testing.F) {
	var b []byte
	for _, r := range sampleRecords() {
		b = append(b, r.frame()...)
		f.Add(bytes.Clone(b))
	}
	f.Add([]byte{})
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Add(append([]byte("garbage in the middle"), b...))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := parseRecords(data)
		covered := 0
		ri, si := 0, 0
		for covered < s.end {
			switch {
			case ri < len(s.recs) && s.recs[ri].off == covered:
				r := s.recs[ri]
				if fr := r.frame(); !bytes.Equal(fr, data[r.off:r.off+len(fr)]) {
					t.Fatalf("record at %d does not re-encode", r.off)
				}
				covered += r.n
				ri++
			case si < len(s.skipped) && s.skipped[si].off == covered && s.skipped[si].n > 0:
				covered += s.skipped[si].n
				si++
			default:
				t.Fatalf("nothing accounts for byte %d (records %d, skipped %+v)", covered, len(s.recs), s.skipped)
			}
		}
		if covered != s.end || ri != len(s.recs) || si != len(s.skipped) {
			t.Fatalf("records and skipped runs cover %d bytes, end says %d", covered, s.end)
		}
		if (s.tail == nil) != (s.end == len(data)) || s.tail != nil && (s.tail.off != s.end || s.tail.off+s.tail.n != len(data)) {
			t.Fatalf("end %d of %d, tail %+v", s.end, len(data), s.tail)
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
