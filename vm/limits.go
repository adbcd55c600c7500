package vm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/tensor"
)

// ErrMemoryLimit is wrapped by every refusal of the Limits: a tensor or a call that
// would need more memory than they allow. A refusal caused by a request's shapes wraps
// ErrInput too; one caused by the executable alone (its static plan) is a load error.
var ErrMemoryLimit = errors.New("memory limit exceeded")

// Limits bound the memory of one call. A zero field takes DefaultLimits' value; a
// negative one means no limit.
type Limits struct {
	// TensorBytes is the largest single tensor a call may allocate (a planned or
	// run-time sized tensor, a builtin's result).
	TensorBytes int64
	// RequestBytes is the most device memory one call may hold at once: its inputs,
	// the static plan's arena and the storages sized at run time.
	RequestBytes int64
	// Hint tells a user how to raise the limits; it ends every refusal ("" gives a
	// generic sentence).
	Hint string
}

// Default fractions of the memory available to the process (SystemMemory).
const (
	defaultRequestShare = 2 // a call may hold half of it
	defaultTensorShare  = 4 // a tensor may take a quarter of it
)

// DefaultLimits derives the limits from the memory available to the process: a call
// may hold half of it and one tensor a quarter.
func DefaultLimits() Limits {
	mem := SystemMemory()
	return Limits{TensorBytes: mem / defaultTensorShare, RequestBytes: mem / defaultRequestShare}
}

// Resolved fills zero fields from DefaultLimits and turns negative ones into "none".
func (l Limits) Resolved() Limits {
	var def Limits
	if l.TensorBytes == 0 || l.RequestBytes == 0 {
		def = DefaultLimits()
	}
	pick := func(v, d int64) int64 {
		switch {
		case v == 0:
			return d
		case v < 0:
			return noLimit
		}
		return v
	}
	l.TensorBytes, l.RequestBytes = pick(l.TensorBytes, def.TensorBytes), pick(l.RequestBytes, def.RequestBytes)
	if l.Hint == "" {
		l.Hint = "the limits are vm.Limits (TensorBytes, RequestBytes); by default a quarter and a half of the memory available to the process"
	}
	return l
}

const noLimit = int64(1<<63 - 1)

// TensorError refuses a tensor of bytes; what names it (a value and its node).
func (l Limits) TensorError(what string, bytes int64) error {
	return fmt.Errorf("%w: %s needs %d bytes, more than the limit of %d bytes for one tensor (%s)", ErrMemoryLimit, what, bytes, l.TensorBytes, l.Hint)
}

// RequestError refuses a call that would hold bytes at once.
func (l Limits) RequestError(what string, bytes int64) error {
	return fmt.Errorf("%w: %s: the request would hold %d bytes, more than the limit of %d bytes for one request (%s)", ErrMemoryLimit, what, bytes, l.RequestBytes, l.Hint)
}

var systemMemory = sync.OnceValue(func() int64 {
	phys := physicalMemory()
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if v, ok := cgroupLimit(path); ok && v > 0 && (phys <= 0 || v < phys) {
			return v
		}
	}
	if phys > 0 {
		return phys
	}
	return 1 << 32 // unknown: assume a small machine
})

// SystemMemory is the memory available to the process: the cgroup's limit (v2
// memory.max, else v1 memory.limit_in_bytes) when it is set and below the physical
// memory, else the physical memory. It is read once.
func SystemMemory() int64 { return systemMemory() }

// cgroupLimit reads a cgroup memory limit file ("max" or a huge value means none).
func cgroupLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// BuiltinMemPlan(program, s0, s1, ...) checks a call's memory once its symbols are
// bound, before its first run-time sized tensor is allocated. The program
// (EncodeShapeProgram, over the symbols' values) yields an int64 [2, k] tensor: row 0
// the bytes the run-time sized storages hold at each of k allocations, row 1 the bytes
// of the tensor allocated there; the instruction's Str names those tensors, one line
// each. The largest of row 0 plus what the call holds already (inputs, arena) must be
// within Limits.RequestBytes and every tensor within TensorBytes, else the call fails
// with an error wrapping ErrInput and ErrMemoryLimit that names the tensor. The result
// is that largest total. The builtin is the VM's own: Load's table need not hold it.
const BuiltinMemPlan = "mem.plan"

// memPlanBound bounds the byte counts a memory plan program may compute (2^62: far
// above any limit, so a larger request is refused by the limit, not as malformed).
const memPlanBound = int64(1) << 62

func (c *call) memPlan(in *Instr, args []*tensor.Tensor) (*tensor.Tensor, error) {
	_, shape, v, err := runShapeProgram(BuiltinMemPlan, args, memPlanBound)
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 || shape[0] != 2 {
		return nil, fmt.Errorf("%s: the program yields %v, want [2, k]", BuiltinMemPlan, shape)
	}
	k := shape[1]
	names := strings.Split(in.Str, "\n")
	name := func(i int) string {
		if len(names) == k {
			return names[i]
		}
		return fmt.Sprintf("run-time sized tensor %d", i)
	}
	peak, at := int64(0), 0
	for i := range k {
		if held, size := v[i], v[k+i]; held < 0 || size < 0 {
			return nil, fmt.Errorf("%s: negative byte count", BuiltinMemPlan)
		} else if size > c.m.limits.TensorBytes {
			return nil, fmt.Errorf("%w: %w", ErrInput, c.m.limits.TensorError(name(i), size))
		} else if held > peak {
			peak, at = held, i
		}
	}
	if total, err := tensor.CheckedAdd(c.held, peak); err != nil || total > c.m.limits.RequestBytes {
		return nil, fmt.Errorf("%w: %w", ErrInput, c.m.limits.RequestError("planned at "+name(at), c.held+peak))
	}
	return tensor.Scalar(peak), nil
}

// checkStatic refuses an executable whose static memory exceeds l: a storage of a
// static size above RequestBytes (the static plan's arena) or a tensor of a static shape
// above TensorBytes.
func (x *Executable) checkStatic(l Limits) error {
	for _, f := range x.Functions {
		for pc := range f.Code {
			in := &f.Code[pc]
			switch in.Op {
			case AllocStorage:
				if len(in.Args) == 0 && in.Imm > l.RequestBytes {
					return fmt.Errorf("function %s, instruction %d: %w", f.Name, pc, l.RequestError(what(in), in.Imm))
				}
			case AllocTensor:
				if b, _ := tensor.CheckedBytes(in.DType, in.Shape); b > l.TensorBytes { // Verify checked the count
					return fmt.Errorf("function %s, instruction %d: %w", f.Name, pc, l.TensorError(what(in), b))
				}
			}
		}
	}
	return nil
}
