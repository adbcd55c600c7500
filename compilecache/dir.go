package compilecache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/internal/workdir"
)

// The cache directory holds native code that kiln loads and runs, so it is trusted like
// the kiln binary. Open refuses a directory that others can write (ErrUnsafeDir):
//   - the directory, its blobs/ and its journal are not writable by others (o+w);
//   - no directory above it is writable by others unless it is sticky (like /tmp), where
//     others cannot rename or remove what is not theirs;
//   - in a sticky directory writable by others, it belongs to this process's user or to
//     root: anyone can create a name there before kiln does.
//
// Group write is allowed: a group that shares a cache (a prebuild job and the servers) is
// trusted like the owner. Files and directories kiln creates take their permission bits
// from the cache directory's own: a directory 0755 gives files 0644 (another uid can read
// a warm cache filled by root), 0750 gives 0640 and 0700 gives 0600.

// ErrUnsafeDir is wrapped by Open when the cache directory could be written by users
// other than its owner and group.
var ErrUnsafeDir = errors.New("cache directory writable by other users")

// perms are the modes of what kiln creates in a cache directory.
type perms struct {
	dir  fs.FileMode // permission bits and setgid of the cache directory
	file fs.FileMode // dir's read and write bits
}

func permsOf(st fs.FileInfo) perms {
	d := st.Mode() & (fs.ModePerm | fs.ModeSetgid)
	return perms{dir: d, file: d.Perm() & 0o666}
}

// checkTrusted applies the rules above to dir (which exists).
func checkTrusted(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for _, p := range []string{abs, filepath.Join(abs, "blobs"), filepath.Join(abs, "journal")} {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st.Mode().Perm()&0o002 != 0 {
			return fmt.Errorf("%w: %s is writable by everyone (mode %v); it holds native code that kiln runs: chmod o-w it", ErrUnsafeDir, p, st.Mode().Perm())
		}
	}
	self, err := os.Stat(abs)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o002 != 0 {
			if st.Mode()&fs.ModeSticky == 0 {
				return fmt.Errorf("%w: %s, above the cache directory, is writable by everyone and not sticky: anyone could replace the cache", ErrUnsafeDir, p)
			}
			if p == filepath.Dir(abs) {
				if uid := ownerOf(self); uid != 0 && uid != os.Geteuid() {
					return fmt.Errorf("%w: %s is in the shared directory %s and belongs to uid %d, not to this user or root", ErrUnsafeDir, abs, p, uid)
				}
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func ownerOf(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// ensureDir creates dir (one level) with mode p.dir when it is missing, and makes the new
// name durable by syncing its parent. It reports whether it created the directory.
func ensureDir(dir string, p perms) (bool, error) {
	err := os.Mkdir(dir, p.dir.Perm())
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// the umask may have narrowed the mode, and Mkdir ignores setgid
	if err := os.Chmod(dir, p.dir); err != nil {
		return true, err
	}
	return true, syncDir(filepath.Dir(dir))
}

// ensureDirAll creates dir and the missing directories above it (mode 0755 less the
// umask), syncing the parent of each one it creates.
func ensureDirAll(dir string) error {
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := ensureDirAll(parent); err != nil {
			return err
		}
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// writeAtomic publishes data at path: a temporary file in dir, mode perm, fsync,
// rename, fsync of the directory. Readers see the old file or the whole new one.
func writeAtomic(dir, path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// damagedPrefix names the copies of a damaged journal kept beside it; keptCopies of them
// are kept, the newest.
const (
	damagedPrefix = "journal.damaged-"
	keptCopies    = 4
)

// keepCopy writes data (a damaged journal) to journal.damaged-<UTC time> in dir and
// removes the oldest copies beyond keptCopies; it returns the copy's path.
func keepCopy(dir string, data []byte, perm fs.FileMode) (string, error) {
	path := filepath.Join(dir, damagedPrefix+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := writeAtomic(dir, path, data, perm); err != nil {
		return "", err
	}
	old, _ := filepath.Glob(filepath.Join(dir, damagedPrefix+"*"))
	slices.Sort(old) // the names sort by time
	for len(old) > keptCopies {
		os.Remove(old[0])
		old = old[1:]
	}
	return path, nil
}

// isPermission says whether err means this process may not write there.
func isPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// TempDir is the base for the work directories of other kiln components that write
// scratch files while they build entries (the C compiler): tmp/ in the cache directory,
// claimed and cleaned through internal/workdir. It is "" when the journal is off or
// read-only.
func (j *Journal) TempDir() string {
	if j.jf == nil || j.jf.readonly {
		return ""
	}
	return filepath.Join(j.dir, "tmp")
}

// cleanTemp removes the work directories in tmp/ of processes that are gone.
func (j *Journal) cleanTemp() int {
	n, err := workdir.Clean(filepath.Join(j.dir, "tmp"), "")
	if n > 0 {
		j.log.Info("removed work directories of processes that are gone", zap.String("dir", filepath.Join(j.dir, "tmp")), zap.Int("count", n))
	}
	if err != nil {
		j.log.Debug("some work directories could not be removed", zap.Error(err))
	}
	return n
}
