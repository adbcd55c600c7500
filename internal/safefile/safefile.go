package safefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular: the path names a directory, FIFO, device or socket, not a file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutside: the path, symlinks resolved, leaves the directory it must stay in.
	ErrOutside = errors.New("outside its directory")
	// ErrTooLarge: the file is larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// Open opens path for reading if it is a regular file. The open does not block on a
// FIFO or a device (O_NONBLOCK), and the type is checked on the descriptor itself, so a
// path swapped between a check and the open is still caught.
func Open(path string) (*os.File, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return f, nil
}

// ReadFile reads a regular file of at most limit bytes (limit < 0: no limit).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if limit >= 0 && st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), limit)
	}
	// the size may change while reading: read what is there, never past the limit
	r := io.Reader(f)
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
	}
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b := buf.Bytes()
	if limit >= 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}

// Within resolves rel (slash-separated, relative) under root, following symlinks, and
// returns the resolved path if it stays inside root (itself resolved). The path must
// exist.
func Within(root, rel string) (string, error) {
	if rel == "" || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	base, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(base, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	if !Inside(base, real) {
		return "", fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	return real, nil
}

// Inside reports whether path is base or below it (both already resolved and clean).
func Inside(base, path string) bool {
	r, err := filepath.Rel(base, path)
	return err == nil && filepath.IsLocal(r)
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a plain file"
}
