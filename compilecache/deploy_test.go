package compilecache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fillWarm publishes testMaterial("warm", "c") in dir and returns its content's size.
func fillWarm(t *testing.T, dir string) int {
	t.Helper()
	j, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	data := content(4000, 2<<20, 5)
	if err := j.Put(testMaterial("warm", "c"), "warm", data, 4000); err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// chmodTree applies mode to every directory (dirMode) and file (fileMode) under dir.
func chmodTree(t *testing.T, dir string, dirMode, fileMode fs.FileMode) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, dirMode)
		}
		return os.Chmod(p, fileMode)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyCacheServesWarmWithoutWriting: a cache whose directory and files this
// process cannot write (as root: the reader runs as another uid; otherwise the tree is
// made read-only) serves a hit with policy readonly, with no error and no change to the
// tree, even though its journal has a torn tail a writer would truncate.
func TestReadOnlyCacheServesWarmWithoutWriting(t *testing.T) {
	shared := sharedTempDir(t)
	dir := filepath.Join(shared, "cache")
	n := fillWarm(t, dir)
	torn := (&record{typ: recUse, key: testMaterial("warm", "c").Key(), time: 1}).frame()
	f, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn[:len(torn)-3])
	f.Close()
	var line string
	before := treeState(t, dir)
	if os.Geteuid() == 0 {
		line = asOtherUser(t, shared, dir, PolicyReadOnly, "warm")
	} else {
		chmodTree(t, dir, 0o555, 0o444)
		t.Cleanup(func() { chmodTree(t, dir, 0o755, 0o644) })
		var b bytes.Buffer
		t.Setenv("KILN_HELPER_DIR", dir)
		t.Setenv("KILN_HELPER_POLICY", string(PolicyReadOnly))
		t.Setenv("KILN_HELPER_MODEL", "warm")
		helperMain(&b)
		line = strings.TrimSpace(b.String())
	}
	if want := fmt.Sprintf("hit %d readonly", n); line != want {
		t.Fatalf("reader said %q, want %q", line, want)
	}
	if after := treeState(t, dir); after != before {
		t.Fatalf("the read-only reader changed the cache:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestCacheFilledByRootIsWarmForAnotherUser: root fills a cache in a 0755 directory;
// another uid running with the default policy (on) gets the hit, using the journal
// read-only because it may not write it.
func TestCacheFilledByRootIsWarmForAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the cache is filled as root and read as uid 65534")
	}
	shared := sharedTempDir(t)
	dir := filepath.Join(shared, "cache")
	n := fillWarm(t, dir)
	before := treeState(t, dir)
	if got, want := asOtherUser(t, shared, dir, PolicyOn, "warm"), fmt.Sprintf("hit %d readonly", n); got != want {
		t.Fatalf("uid %d said %q, want %q", otherUID, got, want)
	}
	if after := treeState(t, dir); after != before {
		t.Fatalf("uid %d changed the cache:\nbefore\n%s\nafter\n%s", otherUID, before, after)
	}
}

// TestReadOnlyOpenNeitherCreatesNorRepairs: policy readonly on a writable directory
// holding only a damaged journal reads every undamaged entry and leaves the directory
// exactly as it was (no subdirectories, no copy, no truncation); on a missing directory
// it is an empty cache and creates nothing.
func TestReadOnlyOpenNeitherCreatesNorRepairs(t *testing.T) {
	dir := t.TempDir()
	data := journalHeader()
	var keys []Key
	for i := range 5 {
		m := testMaterial(fmt.Sprint("ro", i), "c")
		keys = append(keys, m.Key())
		data = append(data, (&record{typ: recPut, key: m.Key(), time: int64(i + 1), blob: Digest{byte(i)}, size: 1, stored: 1, mat: m}).frame()...)
	}
	second := journalHeaderSize + len((&record{typ: recPut, key: keys[0], time: 1, blob: Digest{0}, size: 1, stored: 1, mat: testMaterial("ro0", "c")}).frame())
	data[second+40] ^= 0x10                                      // damage the second record
	data = append(data, 0x30, 0, 0, 0, 1, 2, 3, 4, byte(recPut)) // and a torn tail
	path := filepath.Join(dir, "journal")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, dir)
	j, logs := openTest(t, dir, Options{Policy: PolicyReadOnly})
	es, err := j.Entries()
	if err != nil || len(es) != 4 {
		t.Fatalf("%d entries (%v), want the 4 undamaged", len(es), err)
	}
	if !logged(logs, "read-only: not repaired") {
		t.Fatalf("the damage was not logged: %v", logs.All())
	}
	if _, err := j.Get(testMaterial("ro0", "c")); !errors.Is(err, ErrMiss) {
		t.Fatalf("an entry whose blob is absent: %v", err)
	}
	if after := treeState(t, dir); after != before {
		t.Fatalf("the reader changed the directory:\nbefore\n%s\nafter\n%s", before, after)
	}
	missing := filepath.Join(t.TempDir(), "absent")
	j2, _ := openTest(t, missing, Options{Policy: PolicyReadOnly})
	if es, err := j2.Entries(); err != nil || len(es) != 0 {
		t.Fatalf("missing directory: %d entries, %v", len(es), err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the reader created %s", missing)
	}
}

// TestFileModesFollowTheDirectory: whatever the umask, what kiln creates in a cache takes
// its permission bits from the cache directory's: files get its read and write bits,
// directories its mode.
func TestFileModesFollowTheDirectory(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, mode := range []fs.FileMode{0o755, 0o750, 0o700} {
		dir := filepath.Join(t.TempDir(), "cache")
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode)
		j, _ := openTest(t, dir, Options{})
		if err := j.Put(testMaterial("modes", "c"), "modes", content(3000, 2<<20, 2), 3000); err != nil {
			t.Fatal(err)
		}
		if _, err := j.create(j.lockPath(testMaterial("modes", "c").Key())); err != nil {
			t.Fatal(err)
		}
		wantFile := mode & 0o666
		n := 0
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			info, _ := d.Info()
			want := wantFile
			if d.IsDir() {
				want = mode
			}
			if got := info.Mode().Perm(); got != want {
				t.Errorf("dir %v: %s has mode %v, want %v", mode, strings.TrimPrefix(p, dir), got, want)
			}
			n++
			return nil
		})
		if n < 9 { // the directory, blobs, blobs/xx, a blob, journal, locks, a lock, quarantine, tmp
			t.Fatalf("dir %v: only %d names", mode, n)
		}
	}
}

// TestPutReplacesADamagedBlobAndFixesModes: a Put whose blob file exists verifies it
// first: a damaged one (same size) is written again, so the entries naming it read
// back; a good one with other permission bits than the directory gives is fixed.
func TestPutReplacesADamagedBlobAndFixesModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, 0o755)
	j, _ := openTest(t, dir, Options{})
	data := content(5000, 0, 0)
	if err := j.Put(testMaterial("one", "c"), "one", data, 0); err != nil {
		t.Fatal(err)
	}
	path := blobPath(dir, DigestOf(data))
	raw, _ := os.ReadFile(path)
	raw[len(raw)-5] ^= 0x01
	os.WriteFile(path, raw, 0o600)
	os.Chmod(path, 0o600)
	if err := j.Put(testMaterial("two", "c"), "two", data, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		if b, err := j.Get(testMaterial(name, "c")); err != nil || !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("%s after the second Put: %v", name, err)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("rewritten blob has mode %v", st.Mode().Perm())
	}
	os.Chmod(path, 0o600) // as an older kiln wrote them
	if err := j.Put(testMaterial("three", "c"), "three", data, 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("a reused blob keeps mode %v", st.Mode().Perm())
	}
	if j.Stats().Corrupt != 0 {
		t.Fatalf("%d corrupt: the damaged blob reached a reader", j.Stats().Corrupt)
	}
}

// TestCacheWritableByOthersIsRefused: a cache directory (or its journal) that others can
// write, or one under a directory that others can write and that is not sticky, is
// refused for every policy that reads it; in a sticky shared directory (like /tmp) it
// must belong to this user or root.
func TestCacheWritableByOthersIsRefused(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "cache")
	fillWarm(t, dir)
	unsafe := func(what string) {
		t.Helper()
		for _, p := range []Policy{PolicyOn, PolicyReadOnly} {
			if _, err := Open(Options{Dir: dir, Policy: p}); !errors.Is(err, ErrUnsafeDir) {
				t.Fatalf("%s, policy %s: %v", what, p, err)
			}
		}
	}
	os.Chmod(dir, 0o777)
	unsafe("directory 0777")
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Join(dir, "journal"), 0o666)
	unsafe("journal 0666")
	os.Chmod(filepath.Join(dir, "journal"), 0o644)
	os.Chmod(base, 0o777)
	unsafe("parent 0777")
	os.Chmod(base, 0o777|fs.ModeSticky)
	j, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("in a sticky parent, owned by this user: %v", err)
	}
	j.Close()
	if os.Geteuid() == 0 {
		os.Chown(dir, 12345, 12345)
		unsafe("in a sticky parent, owned by another user")
	}
	os.Chmod(base, 0o700)
}
