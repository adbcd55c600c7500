package cpu

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/kilnrt/kiln/internal/workdir"
)

// The compiler writes each build's sources and outputs in a directory of its own, inside
// a work directory that this process claims (internal/workdir) in a base directory: the
// cache's tmp/ when SetWorkBase names it, else kiln-<uid> in the system's temporary
// directory, created 0700 and used only when it is a real directory of this user that
// nobody else can enter. Claiming first removes the claims there of processes that are
// gone, so directories of SIGKILLed compiles do not pile up. When no claim can be made
// (a file system without flock, a kiln-<uid> that is not this user's) builds use fresh
// directories in the system's temporary directory, removed after each build.

// workState is where one compiler (or every compiler without a base) builds.
type workState struct {
	mu   sync.Mutex
	base string // "": the per-user default
	dir  *workdir.Dir
	// failed: claiming failed; builds use the system's temporary directory
	failed bool
}

// defaultWork serves compilers without a base of their own.
var defaultWork = &workState{}

func (c *Compiler) workState() *workState {
	if c.work == nil {
		return defaultWork
	}
	return c.work
}

// SetWorkBase makes the compiler build in a work directory claimed in base (a cache's
// tmp/); "" means the per-user default. It releases the compiler's previous claim.
func (c *Compiler) SetWorkBase(base string) {
	if c.work == nil {
		c.work = &workState{}
	}
	w := c.work
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.base == base && (w.dir != nil || !w.failed) {
		return
	}
	w.dir.Release()
	w.base, w.dir, w.failed = base, nil, false
}

// Close releases the compiler's work directory (not the shared default's).
func (c *Compiler) Close() error {
	if c.work == nil {
		return nil
	}
	c.work.mu.Lock()
	defer c.work.mu.Unlock()
	err := c.work.dir.Release()
	c.work.dir = nil
	return err
}

// parent is the directory that builds make their directories in, claimed on first use.
func (w *workState) parent() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dir != nil {
		return w.dir.Path
	}
	if w.failed {
		return os.TempDir()
	}
	base := w.base
	if base == "" {
		var err error
		if base, err = userTempBase(); err != nil {
			w.failed = true
			return os.TempDir()
		}
	}
	workdir.Clean(base, "cc-")
	d, err := workdir.Claim(base, "cc-", 0o700)
	if err != nil {
		w.failed = true
		return os.TempDir()
	}
	w.dir = d
	return d.Path
}

// userTempBase is kiln-<uid> in the system's temporary directory, created 0700, and only
// when it is a directory of this user that others cannot enter (not a name someone else
// put there first).
func userTempBase() (string, error) {
	uid := os.Geteuid()
	base := filepath.Join(os.TempDir(), fmt.Sprintf("kiln-%d", uid))
	if err := os.Mkdir(base, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	st, err := os.Lstat(base)
	if err != nil {
		return "", err
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || st.Mode()&fs.ModeSymlink != 0 || !ok || int(s.Uid) != uid || st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is not a private directory of uid %d", base, uid)
	}
	return base, nil
}
