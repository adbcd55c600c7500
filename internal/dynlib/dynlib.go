package dynlib

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ebitengine/purego"
)

// Open dlopens the first candidate that loads: each is a path or a soname that the
// dynamic loader resolves. It returns the handle and what it loaded, or every attempt
// with the loader's message.
func Open(candidates []string) (uintptr, string, error) {
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

// InDirs lists each name inside each directory, directories first.
func InDirs(dirs []string, names ...string) []string {
	var out []string
	for _, d := range dirs {
		for _, n := range names {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

// EnvFirst puts the path in the environment variable env (when set) before the rest.
func EnvFirst(env string, rest []string) []string {
	if p := os.Getenv(env); p != "" {
		return append([]string{p}, rest...)
	}
	return rest
}

// Symbols resolves every name in table (a name for each function-pointer variable) from
// handle; a missing one is an error naming it.
func Symbols(handle uintptr, table map[string]*uintptr) error {
	for name, fn := range table {
		sym, err := purego.Dlsym(handle, name)
		if err != nil || sym == 0 {
			return fmt.Errorf("missing symbol %s: %v", name, err)
		}
		*fn = sym
	}
	return nil
}

// CString is s as a NUL-terminated C string in Go memory (the Go heap does not move
// objects; callers keep the slice alive through the foreign call).
func CString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
