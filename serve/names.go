package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/kilnrt/kiln/internal/safefile"
)

// Model names and versions come from clients (REST paths, gRPC messages, load
// requests), from flags and from the repository's folder names. One validation applies
// to all of them before a name reaches the file system, a log line or a metric label:
// a model name is one path element of at most 255 bytes of UTF-8 without control
// characters, separators or a leading dot; a version is a canonical non-negative
// decimal. A name that fails, or whose folder (symlinks resolved) is not a directory
// inside the repository, gets the same refusal, which reveals nothing about the file
// system.

// errBadName is the one refusal for a name that is not a model of the repository,
// whatever the reason: it does not echo the name or say what exists.
var errBadName = fmt.Errorf("%w: unknown model (a model is a folder of the model repository; the repository index lists them)", ErrNotFound)

// ValidModelName reports whether name is acceptable as a model name. The protocol
// layers use it to decide whether a client's name may be logged.
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

// unknownModel is the not-found error for a name.
func unknownModel(string) error { return errBadName }

// parseVersion reads a version folder's name or a request's version: a canonical
// decimal ("1", not "01" or "+1").
func parseVersion(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// repoRoot is a model repository with its path resolved once.
type repoRoot struct {
	dir  string // as configured
	real string // symlinks resolved
}

func openRepo(dir string) (repoRoot, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return repoRoot{}, fmt.Errorf("model repository: %w", err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return repoRoot{}, fmt.Errorf("model repository %s: not a directory", dir)
	}
	return repoRoot{dir: dir, real: real}, nil
}

// modelPath resolves a model's folder: a valid name whose folder, symlinks resolved,
// is a directory inside the repository; anything else is errBadName.
func (r repoRoot) modelPath(name string) (string, error) {
	if !ValidModelName(name) {
		return "", errBadName
	}
	p, err := safefile.Within(r.real, name)
	if err != nil {
		return "", errBadName
	}
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", errBadName
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
