//go:build unix

package serve

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// errNotShmObject is the refusal of a key whose file is not a shared memory object
// kiln may open: absent, a symlink, a FIFO, a device, a directory. It does not say
// which, so a client learns nothing else about the directory.
var errNotShmObject = errors.New("no shared memory object of that name (a regular file, not a symlink) can be opened")

// openShm opens the object name (validKey's file name) inside dir for reading and
// writing: relative to dir's descriptor, without following a symlink (O_NOFOLLOW), without
// blocking on a FIFO (O_NONBLOCK), then checked to be a regular file on the descriptor
// itself (fstat), so no later rename in dir changes what was checked.
func openShm(dir, name string) (*os.File, error) {
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.New("the shared memory directory cannot be opened")
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errNotShmObject
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, errNotShmObject
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}
