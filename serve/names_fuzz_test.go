package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/kilnrt/kiln/internal/testdata"
)

// FuzzNamesAreNotPaths: every name a client gives the server is a name, never a path.
// For any string: a model name or a shared memory region name it accepts is one path
// element (no separator, NUL or control character, not "." or "..", no leading dot,
// at most 255 bytes of UTF-8), and a refused region name is not echoed; as a shared
// memory key, the only strings that open an object are the spellings of the one
// regular file in the directory ("inside", "/inside"): never the symlink to a file
// outside, the FIFO, the folder or a file below it.
func FuzzNamesAreNotPaths(f *testing.F) {
	for _, s := range testdata.HostileModelNames {
		f.Add(s)
	}
	for _, s := range testdata.HostileSharedMemoryKeys {
		f.Add(s)
	}
	for _, s := range []string{"inside", "/inside", "//inside", "inside/", "./inside", "link", "/link", "fifo", "sub", "sub/deep", "/sub/deep", "../outside/secret", "mlp", "\u00e9t\u00e9"} {
		f.Add(s)
	}
	root := f.TempDir()
	dir, outside := filepath.Join(root, "shm"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			f.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(dir, "inside"), filepath.Join(dir, "sub", "deep"), filepath.Join(outside, "secret")} {
		if err := os.WriteFile(p, make([]byte, 64), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		f.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		f.Fatal(err)
	}
	r := newShmRegistry(dir)
	defer r.close()

	f.Fuzz(func(t *testing.T, name string) {
		oneElement := name != "" && name != "." && name != ".." && name[0] != '.' && len(name) <= 255 && utf8.ValidString(name) &&
			!strings.ContainsAny(name, "/\\\x00") && !strings.ContainsFunc(name, unicode.IsControl)
		if ValidModelName(name) && !oneElement {
			t.Fatalf("model name %q accepted", name)
		}

		// as a region name
		err := r.register(name, "inside", 0, 64)
		switch {
		case err == nil:
			if !oneElement {
				t.Fatalf("region name %q accepted", name)
			}
			if err := r.unregister(name); err != nil {
				t.Fatal(err)
			}
		case !errors.Is(err, ErrInvalid):
			t.Fatalf("region name %q: %v does not wrap ErrInvalid", name, err)
		case oneElement && validRegionName(name):
			t.Fatalf("region name %q refused: %v", name, err)
		case errors.Is(err, errBadRegionName):
		default:
			t.Fatalf("region name %q: %v, want the fixed refusal", name, err)
		}

		// as a key
		err = r.register("r", name, 0, 64)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `region "r"`) {
				t.Fatalf("key %q: %v", name, err)
			}
			return
		}
		defer r.unregister("r")
		if strings.TrimPrefix(name, "/") != "inside" {
			t.Fatalf("key %q opened an object", name)
		}
		st, _ := r.status("r")
		if len(st) != 1 || st[0].Key != name {
			t.Fatalf("status %+v", st)
		}
	})
}
