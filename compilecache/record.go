package compilecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// The journal file: a 16-byte header (magic, schema version, reserved), then records,
// each framed as payload length (u32 LE), CRC-32C of the payload (u32 LE), payload.

// SchemaVersion is the journal and blob format version; it is part of every key.
const SchemaVersion = 1

var journalMagic = [8]byte{'K', 'I', 'L', 'N', 'J', 'R', 'N', 'L'}

const (
	journalHeaderSize = 16
	frameSize         = 8
	maxRecord         = 1 << 20 // no record is larger; a bigger length is damage
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
}

func journalHeader() []byte {
	h := make([]byte, journalHeaderSize)
	copy(h, journalMagic[:])
	binary.LittleEndian.PutUint32(h[8:], SchemaVersion)
	return h
}

// errJournalHeader: the file is not a journal of this schema.
var errJournalHeader = errors.New("not a kiln journal of this schema version")

func checkJournalHeader(h []byte) error {
	if len(h) < journalHeaderSize || string(h[:8]) != string(journalMagic[:]) {
		return fmt.Errorf("%w: bad magic", errJournalHeader)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != SchemaVersion {
		return fmt.Errorf("%w: schema %d, this kiln writes %d", errJournalHeader, v, SchemaVersion)
	}
	return nil
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

// parseRecords decodes records from b (the bytes after the header) up to the first
// incomplete or damaged one; good is how many bytes the complete records take, and
// damaged says why it stopped early (nil when b ended exactly at a record boundary).
func parseRecords(b []byte) (recs []record, good int, damaged error) {
	for good < len(b) {
		rest := b[good:]
		if len(rest) < frameSize {
			return recs, good, fmt.Errorf("torn record frame (%d bytes)", len(rest))
		}
		n := binary.LittleEndian.Uint32(rest)
		if n == 0 || n > maxRecord {
			return recs, good, fmt.Errorf("record length %d", n)
		}
		if uint64(len(rest)-frameSize) < uint64(n) {
			return recs, good, fmt.Errorf("torn record (%d of %d bytes)", len(rest)-frameSize, n)
		}
		p := rest[frameSize : frameSize+int(n)]
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
			return recs, good, errors.New("record checksum mismatch")
		}
		r, err := decodeRecord(p)
		if err != nil {
			return recs, good, err
		}
		r.n = frameSize + int(n)
		recs = append(recs, r)
		good += r.n
	}
	return recs, good, nil
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
