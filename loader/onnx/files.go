package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/safefile"
)

// ErrChanged: a model's files no longer hold the content its digest names (a file was
// replaced between the digest and the load). The caller reads the model again.
var ErrChanged = errors.New("the model's files changed")

// Scanned is what a server keeps of a model version it registers, all taken from one
// read of the model file: the interface, the signature, the content digest, and the
// stamp of the files the digest covers.
type Scanned struct {
	Interface *Interface
	Signature *graph.Module
	Digest    string
	Stamp     Stamp
}

// Scan reads a model file once and derives its interface, signature and digest from
// those bytes (external data is hashed in place, not kept).
func Scan(path string) (*Scanned, error) {
	var stamp Stamp
	if err := stamp.add(path); err != nil {
		return nil, err
	}
	data, err := readBounded(path, maxModelBytes)
	if err != nil {
		return nil, err
	}
	sig, it, err := interfaceOf(path, data)
	if err != nil {
		return nil, err
	}
	digest, err := digestOf(path, data, func(p string) ([32]byte, error) {
		if err := stamp.add(p); err != nil {
			return [32]byte{}, err
		}
		f, err := mapFile(p)
		if err != nil {
			return [32]byte{}, err
		}
		defer f.close()
		return hashBytes(f.data), nil
	})
	if err != nil {
		return nil, err
	}
	return &Scanned{Interface: it, Signature: sig, Digest: digest, Stamp: stamp}, nil
}

// LoadVerified reads a model file and every external data file it names into memory,
// checks that their digest is want, and imports those same bytes: the module is the
// content the digest names, whatever happens to the files meanwhile. A mismatch wraps
// ErrChanged.
func LoadVerified(path, want string, opts Options) (*graph.Module, error) {
	data, err := readBounded(path, maxModelBytes)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	byPath := map[string][]byte{}
	locs, err := externalLocations(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, loc := range locs {
		p, err := externalPath(filepath.Dir(path), loc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b, ok := byPath[p]
		if !ok {
			if b, err = safefile.ReadFile(p, opts.Limit()); err != nil {
				return nil, fmt.Errorf("%s: %w: external data %q: %v", path, ErrInvalid, loc, err)
			}
			byPath[p] = b
		}
		files[loc] = b
	}
	got, err := digestOf(path, data, func(p string) ([32]byte, error) {
		b, ok := byPath[p]
		if !ok { // a symlink changed between the two resolutions
			return [32]byte{}, fmt.Errorf("%w: %s resolves differently", ErrChanged, p)
		}
		return hashBytes(b), nil
	})
	if err != nil {
		return nil, err
	}
	if got != want {
		return nil, fmt.Errorf("%s: %w (digest %s, expected %s)", path, ErrChanged, short(got), short(want))
	}
	mp, opsets, err := decodeModel(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := loadDecoded(mp, opsets, &tensorDecoder{dir: filepath.Dir(path), limit: opts.Limit(), files: files})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func short(digest string) string {
	if i := len(digest) - 12; i > 0 {
		return "…" + digest[i:]
	}
	return digest
}

// Stamp identifies the files a model was read from: their size, modification time and
// inode, so a replaced or rewritten file is noticed without hashing it again.
type Stamp []fileStamp

type fileStamp struct {
	path  string
	size  int64
	mtime time.Time
	ino   uint64
}

func (s *Stamp) add(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	*s = append(*s, stampOf(path, st))
	return nil
}

func stampOf(path string, st os.FileInfo) fileStamp {
	fs := fileStamp{path: path, size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fs.ino = sys.Ino
	}
	return fs
}

// Changed reports whether any file differs from its stamp (or is gone).
func (s Stamp) Changed() bool {
	for _, f := range s {
		st, err := os.Stat(f.path)
		if err != nil {
			return true
		}
		if n := stampOf(f.path, st); n.size != f.size || !n.mtime.Equal(f.mtime) || n.ino != f.ino {
			return true
		}
	}
	return false
}
