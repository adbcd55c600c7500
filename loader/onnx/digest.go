package onnx

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"

	"google.golang.org/protobuf/encoding/protowire"
)

// Digest is the content digest of a model for cache keys: the model file and every
// external data file its tensors name, never their paths. The protobuf is scanned for
// external_data locations without being decoded, and large files are hashed in 8 MiB
// chunks in parallel (SHA-256 of the chunks' SHA-256s and the length), so a warm start
// does not pay for a full model load.
func Digest(path string) (string, error) {
	model, err := hashFile(path)
	if err != nil {
		return "", err
	}
	locs, err := externalLocations(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	h := sha256.New()
	h.Write(model[:])
	for _, loc := range locs {
		if !filepath.IsLocal(filepath.FromSlash(loc)) {
			return "", fmt.Errorf("%s: %w: external data location %q leaves the model directory", path, ErrInvalid, loc)
		}
		d, err := hashFile(filepath.Join(filepath.Dir(path), filepath.FromSlash(loc)))
		if err != nil {
			return "", fmt.Errorf("%s: external data: %w", path, err)
		}
		fmt.Fprintf(h, "%d:%s", len(loc), loc)
		h.Write(d[:])
	}
	return "sha256x8m:" + hex.EncodeToString(h.Sum(nil)), nil
}

const digestChunk = 8 << 20

// hashFile maps a file and hashes it chunk by chunk on every core.
func hashFile(path string) ([32]byte, error) {
	var out [32]byte
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return out, err
	}
	size := st.Size()
	var data []byte
	if size > 0 {
		data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return out, err
		}
		defer syscall.Munmap(data)
	}
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
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(size)))
	for _, s := range sums {
		h.Write(s[:])
	}
	h.Sum(out[:0])
	return out, nil
}

// externalLocations lists the distinct external data files a model names, sorted,
// walking ModelProto.graph and every nested graph (node attributes) with protowire.
func externalLocations(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	defer syscall.Munmap(data)
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
