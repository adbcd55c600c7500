// Package workdir gives a process its own working directory under a base directory that
// several processes share (a cache's tmp/, a per-user temporary directory), and removes
// the directories of processes that are gone, even when they were SIGKILLed.
//
// Model: a claim is two names in the base, <name>.lock and <name>/. The claiming process
// creates the lock file with O_EXCL, takes an exclusive flock on it and holds it for as
// long as it uses the directory; the kernel drops the flock when the process dies, however
// it dies. A cleaner removes a claim only while it holds that flock itself (taken without
// waiting), so it never removes the directory of a live process.
//
// Invariants:
//   - A directory exists only while its lock file exists: Claim creates the lock, then the
//     directory; Release and Clean remove the directory, then the lock.
//   - Claim creates the directory only after checking that the lock file it holds is
//     still the one its name points at: a cleaner that took the lock in the instant
//     between the create and the flock has removed the name, and Claim starts again with
//     a new one.
//   - On a volume shared by several hosts the same holds as far as the file system
//     carries flock between them (NFSv4 and CephFS do; a host that dies loses its locks
//     when its lease on the server ends). A file system without flock makes Claim fail:
//     the caller then uses a directory of its own that nobody else cleans.
package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Dir is a claimed working directory.
type Dir struct {
	Path string // the directory: create anything in it
	lock *os.File
}

// Claim creates base (mode perm when it is missing) and a claimed directory in it whose
// name starts with prefix. The directory's mode is 0700.
func Claim(base, prefix string, perm fs.FileMode) (*Dir, error) {
	if err := os.MkdirAll(base, perm); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 100; attempt++ {
		f, err := os.CreateTemp(base, prefix+"*.lock")
		if err != nil {
			return nil, err
		}
		if err := flock(f, syscall.LOCK_EX); err != nil {
			os.Remove(f.Name())
			f.Close()
			return nil, fmt.Errorf("workdir: locking %s: %w", f.Name(), err)
		}
		if !sameFile(f) {
			f.Close() // a cleaner removed it before the lock was ours
			continue
		}
		dir := strings.TrimSuffix(f.Name(), ".lock")
		if err := os.Mkdir(dir, 0o700); err != nil {
			os.Remove(f.Name())
			f.Close()
			return nil, err
		}
		return &Dir{Path: dir, lock: f}, nil
	}
	return nil, fmt.Errorf("workdir: cannot claim a directory in %s", base)
}

// Release removes the directory and its lock.
func (d *Dir) Release() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	if err == nil {
		err = os.Remove(d.lock.Name())
	}
	d.lock.Close()
	d.lock = nil
	return err
}

// Clean removes the claims in base whose name starts with prefix and whose lock no
// process holds, and returns how many it removed. A missing base is clean.
func Clean(base, prefix string) (int, error) {
	locks, err := filepath.Glob(filepath.Join(base, globEscape(prefix)+"*.lock"))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, l := range locks {
		removed, err := cleanOne(l)
		if removed {
			n++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func cleanOne(lockPath string) (bool, error) {
	f, err := os.Open(lockPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil // its process is alive
		}
		return false, err
	}
	if !sameFile(f) {
		return false, nil // removed and perhaps created again meanwhile
	}
	if err := os.RemoveAll(strings.TrimSuffix(lockPath, ".lock")); err != nil {
		return false, err
	}
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// sameFile says whether f's name still names f.
func sameFile(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// globEscape quotes the glob metacharacters of s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
