package serve

import (
	"fmt"

	"github.com/kilnrt/kiln/serve/modelrepo"
)

// Model names and versions come from clients (REST paths, gRPC messages, load
// requests), from flags and from the repository's folder names. One validation applies
// to all of them before a name reaches the file system, a log line or a metric label
// (modelrepo.ValidModelName, modelrepo.ParseVersion): a model name is one path element
// of at most 255 bytes of UTF-8 without control characters, separators or a leading
// dot; a version is a canonical non-negative decimal. A name that fails, or whose
// folder (symlinks resolved) is not a directory inside the repository, gets the same
// refusal, which reveals nothing about the file system.

// errBadName is the one refusal for a name that is not a model of the repository,
// whatever the reason: it does not echo the name or say what exists.
var errBadName = fmt.Errorf("%w: %w", ErrNotFound, modelrepo.ErrUnknownModel)

// ValidModelName reports whether name is acceptable as a model name
// (modelrepo.ValidModelName). The protocol layers use it to decide whether a client's
// name may be logged.
func ValidModelName(name string) bool { return modelrepo.ValidModelName(name) }

// unknownModel is the not-found error for a name.
func unknownModel(string) error { return errBadName }

// parseVersion reads a request's version as a version folder's name is read.
func parseVersion(s string) (int64, bool) { return modelrepo.ParseVersion(s) }

// repoRoot is the model repository with its path resolved once.
type repoRoot = modelrepo.Root

func openRepo(dir string) (repoRoot, error) { return modelrepo.Open(dir) }
