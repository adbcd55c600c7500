package opencl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ebitengine/purego"
)

// openLibrary dlopens the first candidate that loads: each is a path or a soname that the
// dynamic loader resolves. It returns the handle and what it loaded, or every attempt
// with the loader's message (for an ErrUnavailable reason).
func openLibrary(candidates []string) (uintptr, string, error) {
	var tried []string
	for _, c := range candidates {
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, c, nil
		}
		if msg := err.Error(); strings.Contains(msg, c) {
			tried = append(tried, msg) // the loader's message names the file
		} else {
			tried = append(tried, fmt.Sprintf("%s: %s", c, msg))
		}
	}
	return 0, "", fmt.Errorf("tried %s", strings.Join(tried, "; "))
}

// inDirs lists each name inside each directory, directories first.
func inDirs(dirs []string, names ...string) []string {
	var out []string
	for _, d := range dirs {
		for _, n := range names {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

// envFirst puts the path in the environment variable env (when set) before the rest.
func envFirst(env string, rest []string) []string {
	if p := os.Getenv(env); p != "" {
		return append([]string{p}, rest...)
	}
	return rest
}

// symbols resolves every name in table (a name for each field address) from handle; a
// missing one is an error naming it.
func symbols(handle uintptr, table map[string]*uintptr) error {
	for name, fn := range table {
		sym, err := purego.Dlsym(handle, name)
		if err != nil || sym == 0 {
			return fmt.Errorf("missing symbol %s: %v", name, err)
		}
		*fn = sym
	}
	return nil
}

// cstring is s as a NUL-terminated C string in Go memory (the Go heap does not move
// objects; callers keep the slice alive through the foreign call).
func cstring(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// gostring is the bytes of b up to its first NUL (all of b when it has none).
func gostring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
