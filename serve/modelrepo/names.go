package modelrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/kilnrt/kiln/internal/safefile"
)

// ErrUnknownModel is the one refusal for a name that is not a model of the repository,
// whatever the reason (an invalid name, a folder that is missing, not a directory, or
// outside the repository once symlinks are resolved): it does not echo the name or say
// what exists.
var ErrUnknownModel = errors.New("unknown model (a model is a folder of the model repository; the repository index lists them)")

// ValidModelName reports whether name is acceptable as a model name: one path element
// of at most 255 bytes of UTF-8 without control characters, separators or a leading
// dot. The protocol layers use it to decide whether a client's name may be logged.
func ValidModelName(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '.' || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// ParseVersion reads a version folder's name or a request's version: a canonical
// non-negative decimal ("1", not "01" or "+1").
func ParseVersion(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// Root is a model repository with its path resolved once.
type Root struct {
	dir  string // as configured
	real string // symlinks resolved
}

// Open resolves a model repository's directory.
func Open(dir string) (Root, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Root{}, fmt.Errorf("model repository: %w", err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return Root{}, fmt.Errorf("model repository %s: not a directory", dir)
	}
	return Root{dir: dir, real: real}, nil
}

// Dir is the repository's directory as configured.
func (r Root) Dir() string { return r.dir }

// modelPath resolves a model's folder: a valid name whose folder, symlinks resolved,
// is a directory inside the repository; anything else is ErrUnknownModel.
func (r Root) modelPath(name string) (string, error) {
	if !ValidModelName(name) {
		return "", ErrUnknownModel
	}
	p, err := safefile.Within(r.real, name)
	if err != nil {
		return "", ErrUnknownModel
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", ErrUnknownModel
	}
	return p, nil
}

// regularFile checks that p (symlinks followed) is a regular file. Files below a model
// folder are the operator's: their symlinks may lead anywhere; what a client names
// stops at the model folder (modelPath), and what a model or its configuration names
// (external data, warm-up data) stays inside its own folder (safefile.Within).
func regularFile(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", filepath.Base(p), safefile.ErrNotRegular)
	}
	return nil
}

// isMissing reports a file that is simply absent (as opposed to refused).
func isMissing(err error) bool { return errors.Is(err, os.ErrNotExist) }
