package compilecache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

// bigJournal is a journal's bytes: 358 puts (labels and materials of varied lengths), 40
// uses, 20 drops and 10 puts that replace an entry, interleaved as a serving process
// writes them.
func bigJournal() []byte {
	b := journalHeader()
	var keys []Key
	t := int64(1_700_000_000_000_000_000)
	for i := range 358 {
		m := Material{Kind: KindExecutable, Parts: []Component{{"model", fmt.Sprintf("%064x", i*7919)},
			{"inputs", fmt.Sprintf("input_%d[1,%d,224,224]", i, i%5+1)}, {"target", "cpu/amd64/avx2,fma"}}}
		if i%3 == 0 {
			m.Kind = KindKernel
			m.Parts = append(m.Parts, Component{"source", fmt.Sprintf("%064x", i)})
		}
		keys = append(keys, m.Key())
		t += 1000
		b = append(b, (&record{typ: recPut, key: m.Key(), time: t, blob: Digest{byte(i), byte(i >> 8)}, size: int64(i * 100), stored: int64(i * 60),
			label: fmt.Sprintf("model-%d%s", i, bytes.Repeat([]byte{'x'}, i%17)), mat: m}).frame()...)
		t += 1000
		switch {
		case i%9 == 4:
			b = append(b, (&record{typ: recUse, key: keys[i/2], time: t}).frame()...)
		case i%18 == 7:
			b = append(b, (&record{typ: recDrop, key: keys[i-5], time: t, reason: "evicted: over the size budget"}).frame()...)
		case i%36 == 11:
			m := Material{Kind: KindExecutable, Parts: []Component{{"model", fmt.Sprintf("%064x", (i-3)*7919)},
				{"inputs", fmt.Sprintf("input_%d[1,%d,224,224]", i-3, (i-3)%5+1)}, {"target", "cpu/amd64/avx2,fma"}}}
			if (i-3)%3 == 0 {
				continue
			}
			b = append(b, (&record{typ: recPut, key: m.Key(), time: t, blob: Digest{9, byte(i)}, size: 1, stored: 1, label: "replaced", mat: m}).frame()...)
		}
	}
	return b
}

// liveOf replays a journal file read-only, as a reader does.
func liveOf(t *testing.T, dir string) map[Key]Entry {
	t.Helper()
	jf := &journalFile{dir: dir, log: zap.NewNop(), readonly: true}
	if err := jf.open(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if jf.f != nil {
			jf.f.Close()
		}
	}()
	out := map[Key]Entry{}
	for _, e := range jf.snapshot() {
		out[e.Key] = e
	}
	return out
}

// differences counts the keys whose entry differs between two replays (absent from one,
// or another blob or creation time); last-use times are not compared.
func differences(a, b map[Key]Entry) int {
	n := 0
	for k, e := range a {
		if f, ok := b[k]; !ok || f.Blob != e.Blob || !f.Created.Equal(e.Created) || f.Label != e.Label {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// TestOneBitFlipLosesAtMostTheDamagedRecord: a bit flipped anywhere in a journal (every
// header bit, then every byte of the first records, of a record 10% in and of the last,
// and every 61st byte elsewhere) changes at most one entry on replay: the damaged
// record's (a put lost, or an entry a lost drop leaves live); every other entry is the
// same.
func TestOneBitFlipLosesAtMostTheDamagedRecord(t *testing.T) {
	data := bigJournal()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	os.WriteFile(path, data, 0o644)
	base := liveOf(t, dir)
	if len(base) < 300 {
		t.Fatalf("the journal holds %d entries", len(base))
	}
	ten := len(data) / 10
	var positions []int
	for p := range len(data) {
		if p < 300 || p >= ten-150 && p < ten+150 || p >= len(data)-200 || p%61 == 0 {
			positions = append(positions, p)
		}
	}
	worst, changed := 0, 0
	for i, p := range positions {
		bit := byte(1) << (i % 8)
		if p < journalHeaderSize {
			bit = byte(1) << ((p*8 + i/journalHeaderSize) % 8)
		}
		flipped := bytes.Clone(data)
		flipped[p] ^= bit
		if err := os.WriteFile(path, flipped, 0o644); err != nil {
			t.Fatal(err)
		}
		d := differences(base, liveOf(t, dir))
		if d > 1 {
			t.Errorf("bit %#x of byte %d (of %d): %d entries changed", bit, p, len(data), d)
		}
		worst = max(worst, d)
		if d > 0 {
			changed++
		}
	}
	for p := range journalHeaderSize * 8 {
		flipped := bytes.Clone(data)
		flipped[p/8] ^= 1 << (p % 8)
		os.WriteFile(path, flipped, 0o644)
		if d := differences(base, liveOf(t, dir)); d != 0 {
			t.Errorf("header bit %d: %d entries changed", p, d)
		}
	}
	t.Logf("%d entries, %d bytes; %d flips (plus every header bit): %d changed one entry, none more than %d", len(base), len(data), len(positions), changed, worst)
}

// TestDamagedJournalIsCopiedAndRewritten: a writer that opens a journal with a record
// damaged 10% in keeps a copy of the damaged file (journal.damaged-*, named in the log),
// reads every other entry, and rewrites the journal so that the next open finds no
// damage; a read-only reader of the same damage reads the same entries and writes
// nothing.
func TestDamagedJournalIsCopiedAndRewritten(t *testing.T) {
	data := bigJournal()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	os.WriteFile(path, data, 0o644)
	base := liveOf(t, dir)
	s := parseRecords(data[journalHeaderSize:])
	var at int
	for _, r := range s.recs {
		if r.off+journalHeaderSize >= len(data)/10 && r.typ == recPut {
			at = journalHeaderSize + r.off + r.n/2
			break
		}
	}
	data[at] ^= 0x04
	os.WriteFile(path, data, 0o644)

	ro, roLogs := openTest(t, dir, Options{Policy: PolicyReadOnly})
	es, _ := ro.Entries()
	if len(es) != len(base)-1 || !logged(roLogs, "journal damaged") {
		t.Fatalf("read-only: %d entries of %d", len(es), len(base))
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, damagedPrefix+"*")); len(copies) != 0 {
		t.Fatalf("the read-only reader wrote %v", copies)
	}
	ro.Close()

	w, logs := openTest(t, dir, Options{})
	es, _ = w.Entries()
	if len(es) != len(base)-1 {
		t.Fatalf("writer: %d entries of %d", len(es), len(base))
	}
	copies, _ := filepath.Glob(filepath.Join(dir, damagedPrefix+"*"))
	if len(copies) != 1 || !logged(logs, "copy="+copies[0]) {
		t.Fatalf("copies %v; logs %v", copies, logs.All())
	}
	if kept, _ := os.ReadFile(copies[0]); !bytes.Equal(kept, data) {
		t.Fatal("the copy is not the damaged journal")
	}
	w.Close()
	again, logs2 := openTest(t, dir, Options{})
	if es, _ := again.Entries(); len(es) != len(base)-1 || logged(logs2, "damaged") {
		t.Fatalf("after the rewrite: %d entries; logs %v", len(es), logs2.All())
	}
}
