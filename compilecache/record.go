package compilecache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"time"
)

// The journal file: a 16-byte header (magic, schema version, CRC-32C of the twelve bytes
// before it), then records, each framed as payload length (u32 LE), CRC-32C of the
// payload (u32 LE), payload. A header whose last four bytes are zero is read too.

// SchemaVersion is the journal and blob format version; it is part of every key.
const SchemaVersion = 1

var journalMagic = [8]byte{'K', 'I', 'L', 'N', 'J', 'R', 'N', 'L'}

const (
	journalHeaderSize = 16
	frameSize         = 8
	maxRecord         = 1 << 20 // no record is larger; a bigger length is damage
	// minRecord is the smallest payload: a type, a key and a one-byte time
	minRecord = 1 + 32 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type recType byte

const (
	recPut  recType = 1 // an entry is published
	recUse  recType = 2 // an entry was used (for eviction by last use)
	recDrop recType = 3 // an entry is removed: evicted, quarantined, replaced
)

// record is one journal record. Put carries everything; Use and Drop carry the key, the
// time and (Drop) the reason.
type record struct {
	typ    recType
	key    Key
	time   int64 // unix nanoseconds: created (put), used, dropped
	blob   Digest
	size   int64 // the content's bytes
	stored int64 // the blob file's bytes
	label  string
	mat    Material
	reason string
	n      int // the framed size, set when parsed
	off    int // where the frame starts in the parsed bytes, set when parsed
}

func journalHeader() []byte {
	h := make([]byte, journalHeaderSize)
	copy(h, journalMagic[:])
	binary.LittleEndian.PutUint32(h[8:], SchemaVersion)
	binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(h[:12], castagnoli))
	return h
}

// errJournalHeader: the file is not a journal of this schema.
var errJournalHeader = errors.New("not a kiln journal of this schema version")

// headerState is what the first bytes of a journal file are.
type headerState int

const (
	headerOK      headerState = iota
	headerDamaged             // one bit away from this schema's header: ours, damaged
	headerForeign             // another schema, or not a journal
)

// checkJournalHeader classifies a header. Two headers of different schema versions are
// at least two bits apart (the version and its checksum both differ), so one flipped bit
// is recognised as damage to our own header and never mistaken for another version.
func checkJournalHeader(h []byte) (headerState, error) {
	if len(h) < journalHeaderSize {
		return headerForeign, fmt.Errorf("%w: %d-byte header", errJournalHeader, len(h))
	}
	want := journalHeader()
	legacy := bytes.Clone(want)
	clear(legacy[12:])
	if bytes.Equal(h[:journalHeaderSize], want) || bytes.Equal(h[:journalHeaderSize], legacy) {
		return headerOK, nil
	}
	if bitsApart(h, want) == 1 || bitsApart(h, legacy) == 1 {
		return headerDamaged, fmt.Errorf("%w: one bit of the header flipped", ErrCorrupt)
	}
	if string(h[:8]) != string(journalMagic[:]) {
		return headerForeign, fmt.Errorf("%w: bad magic", errJournalHeader)
	}
	return headerForeign, fmt.Errorf("%w: schema %d, this kiln writes %d", errJournalHeader, binary.LittleEndian.Uint32(h[8:]), SchemaVersion)
}

// bitsApart counts the bits in which the first journalHeaderSize bytes of a and b differ.
func bitsApart(a, b []byte) int {
	n := 0
	for i := range journalHeaderSize {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// frame encodes a record with its length and checksum.
func (r *record) frame() []byte {
	var p []byte
	p = append(p, byte(r.typ))
	p = append(p, r.key[:]...)
	p = binary.AppendVarint(p, r.time)
	switch r.typ {
	case recPut:
		p = append(p, r.blob[:]...)
		p = binary.AppendUvarint(p, uint64(r.size))
		p = binary.AppendUvarint(p, uint64(r.stored))
		p = appendStr(p, r.label)
		p = appendStr(p, string(r.mat.Kind))
		p = binary.AppendUvarint(p, uint64(len(r.mat.Parts)))
		for _, c := range r.mat.Parts {
			p = appendStr(appendStr(p, c.Name), c.Value)
		}
	case recDrop:
		p = appendStr(p, r.reason)
	}
	out := make([]byte, frameSize, frameSize+len(p))
	binary.LittleEndian.PutUint32(out, uint32(len(p)))
	binary.LittleEndian.PutUint32(out[4:], crc32.Checksum(p, castagnoli))
	return append(out, p...)
}

func appendStr(p []byte, s string) []byte {
	return append(binary.AppendUvarint(p, uint64(len(s))), s...)
}

// span is a run of journal bytes that holds no valid record.
type span struct {
	off, n int
	why    string
	// torn: the bytes are the start of a record that runs past the end of the file (an
	// append cut short by a crash), not damage
	torn bool
}

// scan is what parseRecords found in the bytes after the header.
type scan struct {
	recs []record
	// end is where the last valid record or skipped run ends: everything after it is
	// the tail
	end int
	// skipped are damaged runs between valid records: parsing resynchronised past them
	skipped []span
	// tail is what follows the last valid record when it is not empty
	tail *span
}

// parseRecords decodes the records of b (the bytes after the header). A run that does
// not decode is skipped and parsing resumes at the next valid record (resync). Records
// keep their offsets in b.
func parseRecords(b []byte) scan {
	var s scan
	off := 0
	for off < len(b) {
		r, torn, err := decodeFrame(b[off:])
		if err == nil {
			r.off = off
			s.recs = append(s.recs, r)
			off += r.n
			s.end = off
			continue
		}
		next := resync(b, off)
		if next < 0 {
			s.tail = &span{off: off, n: len(b) - off, why: err.Error(), torn: torn}
			break
		}
		s.skipped = append(s.skipped, span{off: off, n: next - off, why: err.Error()})
		off = next
		s.end = off
	}
	return s
}

// decodeFrame decodes the record that starts b; torn says the frame is cut short by the
// end of b.
func decodeFrame(b []byte) (r record, torn bool, err error) {
	if len(b) < frameSize {
		return r, true, fmt.Errorf("torn record frame (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if n < minRecord || n > maxRecord {
		return r, false, fmt.Errorf("record length %d", n)
	}
	if uint64(len(b)-frameSize) < uint64(n) {
		return r, true, fmt.Errorf("torn record (%d of %d bytes)", len(b)-frameSize, n)
	}
	p := b[frameSize : frameSize+int(n)]
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return r, false, errors.New("record checksum mismatch")
	}
	if r, err = decodeRecord(p); err != nil {
		return r, false, err
	}
	if r.typ == recPut && r.mat.Key() != r.key {
		return r, false, errors.New("put record whose key is not its material's")
	}
	r.n = frameSize + int(n)
	return r, false, nil
}

// resync returns the offset of the valid record that follows the damaged one at off, or
// -1 when none does. A valid record has a length in range, a known type, its CRC-32C, a
// well-formed payload and, for a put, a key that is the hash of its material.
//
// When the damaged frame is complete (its length fits in b), the damage is most likely
// in its payload and its length says where the next record starts: that record is
// taken. Otherwise the bytes are searched for the first offset where a valid record
// starts a run of valid records that reaches the end of b. Requiring the run to reach
// the end keeps the search from taking a frame embedded in a damaged or torn record's
// strings (a model's input names are stored in key material) for a record: a torn record
// ends the file in the middle of its payload, where no embedded run ends. The cost is
// that a second damaged run behind one whose length was damaged too ends the replay
// there.
func resync(b []byte, off int) int {
	if len(b)-off >= frameSize {
		n := binary.LittleEndian.Uint32(b[off:])
		if n >= minRecord && n <= maxRecord && uint64(len(b)-off-frameSize) >= uint64(n) {
			next := off + frameSize + int(n)
			if next == len(b) {
				return next
			}
			if _, _, err := decodeFrame(b[next:]); err == nil {
				return next
			}
		}
	}
	for p := off + 1; p+frameSize+minRecord <= len(b); p++ {
		n := binary.LittleEndian.Uint32(b[p:])
		if n < minRecord || n > maxRecord || uint64(len(b)-p-frameSize) < uint64(n) {
			continue
		}
		if t := recType(b[p+frameSize]); t != recPut && t != recUse && t != recDrop {
			continue
		}
		if runsToEnd(b[p:]) {
			return p
		}
	}
	return -1
}

// runsToEnd says whether b is a sequence of valid records.
func runsToEnd(b []byte) bool {
	for len(b) > 0 {
		r, _, err := decodeFrame(b)
		if err != nil {
			return false
		}
		b = b[r.n:]
	}
	return true
}

func decodeRecord(p []byte) (record, error) {
	d := &rdec{b: p}
	r := record{typ: recType(d.byte())}
	copy(r.key[:], d.fixed(len(r.key)))
	r.time = d.varint()
	switch r.typ {
	case recPut:
		copy(r.blob[:], d.fixed(len(r.blob)))
		r.size = int64(d.uvarint())
		r.stored = int64(d.uvarint())
		r.label = d.str()
		r.mat.Kind = Kind(d.str())
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			r.mat.Parts = append(r.mat.Parts, Component{Name: d.str(), Value: d.str()})
		}
		if r.size < 0 || r.stored < 0 {
			d.fail()
		}
	case recUse:
	case recDrop:
		r.reason = d.str()
	default:
		return r, fmt.Errorf("unknown record type %d", r.typ)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail()
	}
	if d.err != nil {
		return r, fmt.Errorf("malformed record of type %d", r.typ)
	}
	return r, nil
}

type rdec struct {
	b   []byte
	err error
}

func (d *rdec) fail() { d.err, d.b = errors.New("malformed"), nil }

func (d *rdec) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *rdec) fixed(n int) []byte {
	if len(d.b) < n {
		d.fail()
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *rdec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rdec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rdec) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (r *record) when() time.Time { return time.Unix(0, r.time) }
