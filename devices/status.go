package devices

import (
	"slices"
	"strings"
)

// MaxLaunched bounds the kernel names a Launched keeps between two reads of a status
// block.
const MaxLaunched = 16

// Launched is the set of kernels launched on a GPU device since its status block was
// last read, for the KernelError that names them (a launch does not wait, so a failure is
// known only at the next Sync). The zero value is empty; the device serializes its use.
type Launched struct{ names []string }

// Add records a launch of the kernel name (each name once, at most MaxLaunched).
func (l *Launched) Add(name string) {
	if len(l.names) < MaxLaunched && !slices.Contains(l.names, name) {
		l.names = append(l.names, name)
	}
}

// Take returns the kernels launched since the last Take, as an error names them, and
// forgets them.
func (l *Launched) Take() string {
	s := strings.Join(l.names, ", ")
	switch len(l.names) {
	case 0: // a failure an earlier read could not clear
		s = "(none launched since the last Sync)"
	case MaxLaunched:
		s += ", ..."
	}
	l.names = l.names[:0]
	return s
}

// StatusError is what a GPU device's status block {code, detail0, detail1} reports for
// the kernels named: nil for code 0, else a *KernelError.
func StatusError(kernels string, block [3]int64) error {
	if block[0] == 0 {
		return nil
	}
	return &KernelError{Kernel: kernels, Code: int32(block[0]), Detail: [2]int64{block[1], block[2]}}
}
