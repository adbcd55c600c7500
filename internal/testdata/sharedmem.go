package testdata

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// SharedMemoryDir is where POSIX shared memory objects live (Linux's /dev/shm).
const SharedMemoryDir = "/dev/shm"

var shmSeq atomic.Int64

// SharedMemoryObject creates a shared memory object of size zero bytes under
// SharedMemoryDir with a name no other test uses, removed when the test ends; it
// returns its key (the name after "/", as shm_open spells it) and its path. The test
// skips when the directory is absent.
func SharedMemoryObject(t testing.TB, size int) (key, path string) {
	t.Helper()
	name := sharedMemoryName(t, "obj")
	path = filepath.Join(SharedMemoryDir, name)
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return "/" + name, path
}

func sharedMemoryName(t testing.TB, what string) string {
	t.Helper()
	if st, err := os.Stat(SharedMemoryDir); err != nil || !st.IsDir() {
		t.Skipf("no %s on this system: the shared memory tests need it", SharedMemoryDir)
	}
	return fmt.Sprintf("kiln-test-%d-%d-%s", os.Getpid(), shmSeq.Add(1), what)
}

// HostileSharedMemoryKeys are keys a client may register that name no shared memory
// object: traversals, paths, separators, NUL and control characters, the empty
// name, names too long for a file system. HostileSharedMemory adds objects that exist
// but must not be used.
var HostileSharedMemoryKeys = []string{
	"", "/", "//", ".", "..", "/.", "/..", "../etc", "/../etc", "../../../etc/passwd", "a/b", "/a/b",
	"//etc/passwd", "/dev/shm/x", "./x", "x/", "x\x00", "\x00", "x\x00/../../etc", "a\nb", "\x1b[31m",
	"x\x7f", "\xff\xfe", strings.Repeat("a", 256), "/" + strings.Repeat("a", 256), `..\etc`, "~/x",
}

// HostileSharedMemory lays out under SharedMemoryDir what a client may name as a key
// and the server must refuse: a symlink to a file outside it ("symlink"), a symlink to
// another object inside it ("inner-symlink"), a FIFO ("fifo") and a directory ("dir");
// it returns their keys by kind and the outside file (holding "secret"), all removed
// when the test ends.
func HostileSharedMemory(t testing.TB) (keys map[string]string, outside string) {
	t.Helper()
	outside = filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"+strings.Repeat("\x00", 4090)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, inner := SharedMemoryObject(t, 4096)
	keys = map[string]string{}
	add := func(kind string, make func(path string) error) {
		name := sharedMemoryName(t, kind)
		path := filepath.Join(SharedMemoryDir, name)
		if err := make(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		keys[kind] = "/" + name
	}
	add("symlink", func(p string) error { return os.Symlink(outside, p) })
	add("inner-symlink", func(p string) error { return os.Symlink(inner, p) })
	add("fifo", func(p string) error { return unix.Mkfifo(p, 0o600) })
	add("dir", func(p string) error { return os.Mkdir(p, 0o700) })
	return keys, outside
}
