package vm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

var (
	// ErrFormat: the bytes are not a well-formed kiln executable (foreign file, torn
	// write, corrupted payload, inconsistent references).
	ErrFormat = errors.New("not a valid kiln executable")
	// ErrVersion: a kiln executable of another format version (a cache miss, not damage).
	ErrVersion = errors.New("kiln executable of another format version")
)

// FormatVersion is bumped whenever the encoding or the meaning of an opcode changes.
const FormatVersion = 7

var magic = [8]byte{'K', 'I', 'L', 'N', 'E', 'X', 'E', 0}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// HeaderSize is the size of the fixed header that starts an encoded executable:
//
//	[0:8)   magic "KILNEXE\x00"
//	[8:12)  format version (uint32)
//	[12:16) CRC-32C of the metadata payload
//	[16:24) length of the metadata payload
//	[24:32) offset of the data section (the metadata end rounded up to DataAlign)
//	[32:40) length of the data section
//	[40:44) CRC-32C of the data section
//	[44:48) zero
//
// All integers are little-endian. The metadata payload follows the header, then zero
// padding up to the data section, which runs to the end of the encoding.
const HeaderSize = 48

// DataAlign is the alignment of the data section inside the encoding and of every
// constant inside the data section.
const DataAlign = 64

// header is the decoded fixed header.
type header struct {
	metaSum, dataSum uint32
	metaLen, dataOff int64
	dataLen          int64
	metaEnd          int64 // HeaderSize + metaLen
}

// parseHeader checks magic, version and the layout's arithmetic (not the checksums).
func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < 12 || !bytes.Equal(b[:8], magic[:]) {
		return h, fmt.Errorf("%w: no kiln executable header", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != FormatVersion {
		return h, fmt.Errorf("%w: format %d, this kiln reads %d", ErrVersion, v, FormatVersion)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: truncated header", ErrFormat)
	}
	le := binary.LittleEndian
	metaLen, dataOff, dataLen := le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[32:])
	const limit = 1 << 48 // far beyond any real executable; keeps the arithmetic exact
	if metaLen > limit || dataLen > limit || le.Uint32(b[44:]) != 0 {
		return h, fmt.Errorf("%w: corrupted header", ErrFormat)
	}
	h = header{metaSum: le.Uint32(b[12:]), dataSum: le.Uint32(b[40:]),
		metaLen: int64(metaLen), dataLen: int64(dataLen), metaEnd: HeaderSize + int64(metaLen)}
	if h.dataOff = alignUp(h.metaEnd); uint64(h.dataOff) != dataOff {
		return h, fmt.Errorf("%w: data section at %d, the metadata ends at %d", ErrFormat, dataOff, h.metaEnd)
	}
	return h, nil
}

// DataOffset reads the first HeaderSize bytes of an encoded executable and returns where
// its data section starts: b[:off] is the metadata (header, payload, padding; small,
// compressible), b[off:] the constants' raw bytes, off a multiple of DataAlign. A store
// may keep the two parts apart and hand them to Decode.
func DataOffset(header []byte) (int64, error) {
	h, err := parseHeader(header)
	if err != nil {
		return 0, err
	}
	return h.dataOff, nil
}

func alignUp(n int64) int64 { return (n + DataAlign - 1) &^ (DataAlign - 1) }

// Mapped reports whether some constants alias the data passed to Decode rather than
// owning copies: the VM then binds them to a device in place where it can
// (devices.HostMapper). Such constants must not be written; they are valid while the
// executable is reachable.
func (x *Executable) Mapped() bool { return x.mapped }
