package compilecache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/klauspost/compress/zstd"
)

// A blob file holds one content, named by the SHA-256 of that content:
//
//	header (blobHeaderSize bytes): magic, schema, flags, content size, head size,
//	    compressed head size, tail offset, CRC-32C of the compressed head, CRC-32C of the
//	    tail, SHA-256 of the content, CRC-32C of the header before it
//	the head: content[:head], one zstd frame (with its own content checksum)
//	zero padding to a page boundary, then the tail: content[head:], stored raw
//
// Content that does not compress (model weights) is kept as a raw tail, so readers map
// it from the page cache instead of copying it.

// Digest is the SHA-256 of a blob's content: its address.
type Digest [32]byte

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ErrCorrupt is wrapped by every failure to read a blob or the journal that is damage
// (checksums, sizes, names that do not match): the entry is quarantined and rebuilt.
var ErrCorrupt = errors.New("corrupt cache entry")

var blobMagic = [8]byte{'K', 'I', 'L', 'N', 'B', 'L', 'O', 'B'}

const (
	blobHeaderSize = 96
	pageSize       = 4096
	flagTail       = 1
	// rawTailMin is the smallest tail worth keeping raw; rawRatio the compression ratio
	// (compressed/raw on a sample) above which a tail is kept raw.
	rawTailMin = 1 << 20
	rawRatio   = 0.9
)

type blobHeader struct {
	flags         uint32
	size, head    int64
	zlen, tailOff int64
	crcHead       uint32
	crcTail       uint32
	digest        Digest
}

func (h *blobHeader) encode() []byte {
	b := make([]byte, blobHeaderSize)
	copy(b, blobMagic[:])
	le := binary.LittleEndian
	le.PutUint32(b[8:], SchemaVersion)
	le.PutUint32(b[12:], h.flags)
	le.PutUint64(b[16:], uint64(h.size))
	le.PutUint64(b[24:], uint64(h.head))
	le.PutUint64(b[32:], uint64(h.zlen))
	le.PutUint64(b[40:], uint64(h.tailOff))
	le.PutUint32(b[48:], h.crcHead)
	le.PutUint32(b[52:], h.crcTail)
	copy(b[56:88], h.digest[:])
	le.PutUint32(b[88:], crc32.Checksum(b[:88], castagnoli))
	return b
}

func decodeBlobHeader(b []byte, fileSize int64) (*blobHeader, error) {
	le := binary.LittleEndian
	if len(b) < blobHeaderSize || string(b[:8]) != string(blobMagic[:]) {
		return nil, fmt.Errorf("%w: not a kiln blob", ErrCorrupt)
	}
	if crc32.Checksum(b[:88], castagnoli) != le.Uint32(b[88:]) {
		return nil, fmt.Errorf("%w: blob header checksum mismatch", ErrCorrupt)
	}
	if v := le.Uint32(b[8:]); v != SchemaVersion {
		return nil, fmt.Errorf("%w: blob schema %d", ErrCorrupt, v)
	}
	h := &blobHeader{flags: le.Uint32(b[12:]), size: int64(le.Uint64(b[16:])), head: int64(le.Uint64(b[24:])),
		zlen: int64(le.Uint64(b[32:])), tailOff: int64(le.Uint64(b[40:])), crcHead: le.Uint32(b[48:]), crcTail: le.Uint32(b[52:])}
	copy(h.digest[:], b[56:88])
	bad := h.size < 0 || h.head < 0 || h.head > h.size || h.zlen < 0 || blobHeaderSize+h.zlen > fileSize
	if h.flags&flagTail != 0 {
		bad = bad || h.tailOff < blobHeaderSize+h.zlen || h.tailOff%pageSize != 0 || h.tailOff+(h.size-h.head) != fileSize
	} else {
		bad = bad || h.head != h.size || blobHeaderSize+h.zlen != fileSize
	}
	if bad {
		return nil, fmt.Errorf("%w: blob sizes do not add up (file %d bytes)", ErrCorrupt, fileSize)
	}
	return h, nil
}

// encodeBlob builds a blob file's bytes for content; with rawFrom > 0 the bytes from
// there on are kept raw when they are large and do not compress.
func encodeBlob(enc *zstd.Encoder, content []byte, rawFrom int) ([]byte, Digest) {
	h := blobHeader{size: int64(len(content)), head: int64(len(content)), digest: sha256.Sum256(content)}
	if rawFrom > 0 && rawFrom < len(content) && len(content)-rawFrom >= rawTailMin {
		sample := content[rawFrom : rawFrom+rawTailMin]
		if float64(len(enc.EncodeAll(sample, nil))) > rawRatio*float64(len(sample)) {
			h.head, h.flags = int64(rawFrom), flagTail
		}
	}
	z := enc.EncodeAll(content[:h.head], make([]byte, 0, h.head/2+64))
	h.zlen, h.crcHead = int64(len(z)), crc32.Checksum(z, castagnoli)
	out := append(h.encode(), z...)
	if h.flags&flagTail != 0 {
		tail := content[h.head:]
		h.tailOff = (int64(len(out)) + pageSize - 1) / pageSize * pageSize
		h.crcTail = crc32.Checksum(tail, castagnoli)
		copy(out, h.encode())
		out = append(out, make([]byte, h.tailOff-int64(len(out)))...)
		out = append(out, tail...)
	}
	return out, h.digest
}

// Blob is a blob's content: the head in memory and, when stored raw, the tail mapped
// read-only from the file (copy-on-write, so a stray write cannot reach the file). The
// mapping is released when the Blob becomes unreachable: keep the Blob as long as any
// slice of Tail is in use.
type Blob struct {
	Digest Digest
	head   []byte
	tail   []byte
}

// Head is the content's compressed part, decompressed.
func (b *Blob) Head() []byte { return b.head }

// Tail is the raw part (nil when the whole content was compressed).
func (b *Blob) Tail() []byte { return b.tail }

// Len is the content's size.
func (b *Blob) Len() int { return len(b.head) + len(b.tail) }

// Bytes returns the whole content in one slice (a copy when there is a tail).
func (b *Blob) Bytes() []byte {
	if b.tail == nil {
		return b.head
	}
	out := make([]byte, 0, b.Len())
	return append(append(out, b.head...), b.tail...)
}

// readBlob opens a blob file, checks its header against its name, decompresses and
// checks the head, maps and checks the tail. With full it also recomputes the SHA-256
// of the content (kiln cache verify).
func readBlob(dec *zstd.Decoder, path string, want Digest, full bool) (*Blob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	hb := make([]byte, blobHeaderSize)
	if _, err := io.ReadFull(f, hb); err != nil {
		return nil, fmt.Errorf("%w: blob header: %v", ErrCorrupt, err)
	}
	h, err := decodeBlobHeader(hb, st.Size())
	if err != nil {
		return nil, err
	}
	if h.digest != want {
		return nil, fmt.Errorf("%w: blob %s holds content %s", ErrCorrupt, want.String()[:12], h.digest.String()[:12])
	}
	z := make([]byte, h.zlen)
	if _, err := f.ReadAt(z, blobHeaderSize); err != nil {
		return nil, fmt.Errorf("%w: blob head: %v", ErrCorrupt, err)
	}
	if crc32.Checksum(z, castagnoli) != h.crcHead {
		return nil, fmt.Errorf("%w: blob head checksum mismatch", ErrCorrupt)
	}
	head, err := dec.DecodeAll(z, make([]byte, 0, h.head))
	if err != nil || int64(len(head)) != h.head {
		return nil, fmt.Errorf("%w: blob head does not decompress to %d bytes: %v", ErrCorrupt, h.head, err)
	}
	b := &Blob{Digest: want, head: head}
	if h.flags&flagTail != 0 && h.size > h.head {
		m, err := syscall.Mmap(int(f.Fd()), h.tailOff, int(h.size-h.head), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
		if err != nil {
			return nil, fmt.Errorf("mapping blob tail: %w", err)
		}
		if crc32.Checksum(m, castagnoli) != h.crcTail {
			syscall.Munmap(m)
			return nil, fmt.Errorf("%w: blob tail checksum mismatch", ErrCorrupt)
		}
		b.tail = m
		runtime.AddCleanup(b, func(m []byte) { syscall.Munmap(m) }, m)
	}
	if full {
		s := sha256.New()
		s.Write(b.head)
		s.Write(b.tail)
		if Digest(s.Sum(nil)) != want {
			return nil, fmt.Errorf("%w: content hash mismatch", ErrCorrupt)
		}
	}
	return b, nil
}

func blobPath(dir string, d Digest) string {
	s := d.String()
	return filepath.Join(dir, "blobs", s[:2], s)
}

// DigestOf is the SHA-256 of data.
func DigestOf(data []byte) Digest { return sha256.Sum256(data) }
