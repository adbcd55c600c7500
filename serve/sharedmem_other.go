//go:build !unix

package serve

import (
	"errors"
	"os"
)

// openShm: POSIX shared memory objects exist on Unix systems only.
func openShm(dir, name string) (*os.File, error) {
	return nil, errors.New("system shared memory needs a Unix system")
}
