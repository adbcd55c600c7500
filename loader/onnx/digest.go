package onnx

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kilnrt/kiln/internal/safefile"
)

// Digest is the content digest of a model for cache keys: the model file and every
// external data file its tensors name, never their paths. The protobuf is scanned for
// external_data locations without being decoded, and large files are hashed in 8 MiB
// chunks in parallel (SHA-256 of the chunks' SHA-256s and the length), so a warm start
// does not pay for a full model load. A digest taken from a file that changes while it
// is hashed matches no content; LoadVerified is what proves bytes and digest agree.
func Digest(path string) (string, error) {
	model, err := mapFile(path)
	if err != nil {
		return "", err
	}
	defer model.close()
	return digestOf(path, model.data, func(p string) ([32]byte, error) {
		f, err := mapFile(p)
		if err != nil {
			return [32]byte{}, err
		}
		defer f.close()
		return hashBytes(f.data), nil
	})
}

// digestOf combines the model bytes' hash with each external file's, found by ext from
// its resolved path, in location order.
func digestOf(path string, model []byte, ext func(path string) ([32]byte, error)) (string, error) {
	locs, err := externalLocations(model)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	h := sha256.New()
	sum := hashBytes(model)
	h.Write(sum[:])
	for _, loc := range locs {
		p, err := externalPath(filepath.Dir(path), loc)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		d, err := ext(p)
		if err != nil {
			return "", fmt.Errorf("%s: external data: %w", path, err)
		}
		fmt.Fprintf(h, "%d:%s", len(loc), loc)
		h.Write(d[:])
	}
	return "sha256x8m:" + hex.EncodeToString(h.Sum(nil)), nil
}

// externalPath resolves an external data location under the model's directory: a
// relative path that, symlinks followed, stays inside it.
func externalPath(dir, loc string) (string, error) {
	p, err := safefile.Within(dir, loc)
	if errors.Is(err, safefile.ErrOutside) {
		return "", invalidf("external data location %q leaves the model directory", loc)
	}
	if err != nil {
		return "", fmt.Errorf("%w: external data %q: %v", ErrInvalid, loc, err)
	}
	return p, nil
}

const digestChunk = 8 << 20

// mapped is a read-only mapping of a regular file.
type mapped struct{ data []byte }

func (m mapped) close() {
	if m.data != nil {
		syscall.Munmap(m.data)
	}
}

// mapFile maps a regular file (a FIFO or a device is refused, never waited on).
func mapFile(path string) (mapped, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return mapped{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return mapped{}, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return mapped{}, fmt.Errorf("%s: %w", path, err)
	}
	return mapped{data}, nil
}

// hashBytes hashes data chunk by chunk on every core.
func hashBytes(data []byte) [32]byte {
	var out [32]byte
	n := (len(data) + digestChunk - 1) / digestChunk
	sums := make([][32]byte, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range min(n, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sums[i] = sha256.Sum256(data[i*digestChunk : min(len(data), (i+1)*digestChunk)])
			}
		}()
	}
	wg.Wait()
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(data))))
	for _, s := range sums {
		h.Write(s[:])
	}
	h.Sum(out[:0])
	return out
}

// externalLocations lists the distinct external data files a model names, sorted,
// walking ModelProto.graph and every nested graph (node attributes) with protowire.
func externalLocations(data []byte) ([]string, error) {
	seen := map[string]bool{}
	if err := scanMessage(data, modelFields, seen, 0); err != nil {
		return nil, fmt.Errorf("%w: not an ONNX model: %v", ErrInvalid, err)
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, nil
}

// field numbers of the messages on the way to TensorProto.external_data
type msgKind int

const (
	modelFields msgKind = iota
	graphFields
	nodeFields
	attrFields
	tensorFields
	sparseFields
	entryFields
)

// children says, per message kind, which length-delimited fields hold which messages.
var children = map[msgKind]map[protowire.Number]msgKind{
	modelFields:  {7: graphFields},
	graphFields:  {1: nodeFields, 5: tensorFields, 15: sparseFields},
	nodeFields:   {5: attrFields},
	attrFields:   {5: tensorFields, 6: graphFields, 10: tensorFields, 11: graphFields, 22: sparseFields, 23: sparseFields},
	sparseFields: {1: tensorFields, 2: tensorFields},
	tensorFields: {13: entryFields},
}

func scanMessage(b []byte, kind msgKind, seen map[string]bool, depth int) error {
	if depth > 64 {
		return fmt.Errorf("nesting deeper than 64")
	}
	var key, value string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			b = b[m:]
			if kind == entryFields {
				switch num {
				case 1:
					key = string(v)
				case 2:
					value = string(v)
				}
				continue
			}
			if child, ok := children[kind][num]; ok {
				if err := scanMessage(v, child, seen, depth+1); err != nil {
					return err
				}
			}
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	if kind == entryFields && key == "location" {
		seen[value] = true
	}
	return nil
}
