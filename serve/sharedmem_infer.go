package serve

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/kilnrt/kiln/tensor"
)

// RegisterSystemSharedMemory registers the region name: byteSize bytes from offset of
// the shared memory object key (Triton's system shared memory extension, sharedmem.go).
// A bad name, a key that is not a shared memory object's name, an object that is not
// a regular file or is too small, and a name already registered are ErrInvalid.
func (s *Service) RegisterSystemSharedMemory(name, key string, offset, byteSize uint64) error {
	return s.shm.register(name, key, offset, byteSize)
}

// UnregisterSystemSharedMemory unregisters the region name ("": every region). Requests
// using it finish with it.
func (s *Service) UnregisterSystemSharedMemory(name string) error {
	return s.shm.unregister(name)
}

// SystemSharedMemoryStatus lists the region name, or every region ("") by name; an
// unregistered name is ErrNotFound.
func (s *Service) SystemSharedMemoryStatus(name string) ([]SharedMemoryRegion, error) {
	return s.shm.status(name)
}

// SharedMemoryOf reads the shared memory parameters of an input or output (what names
// it for errors): nil when they name no region. Offsets and sizes may be any integer
// type the protocols carry (a JSON number holding an integer, int64, uint64), never
// negative; shared_memory_region and shared_memory_byte_size come together.
func SharedMemoryOf(what string, params map[string]any) (*SharedMemoryRef, error) {
	region, hasRegion := params[shmRegionParam]
	size, hasSize := params[shmByteSizeParam]
	offset, hasOffset := params[shmOffsetParam]
	if !hasRegion && !hasSize && !hasOffset {
		return nil, nil
	}
	if !hasRegion || !hasSize {
		return nil, fmt.Errorf("%w: %s: %s and %s go together", ErrInvalid, what, shmRegionParam, shmByteSizeParam)
	}
	name, ok := region.(string)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %s must be a string", ErrInvalid, what, shmRegionParam)
	}
	ref := &SharedMemoryRef{Region: name}
	if ref.ByteSize, ok = paramUint(size); !ok {
		return nil, fmt.Errorf("%w: %s: %s %v is not a byte count", ErrInvalid, what, shmByteSizeParam, size)
	}
	if hasOffset {
		if ref.Offset, ok = paramUint(offset); !ok {
			return nil, fmt.Errorf("%w: %s: %s %v is not a byte offset", ErrInvalid, what, shmOffsetParam, offset)
		}
	}
	return ref, nil
}

// paramUint reads a non-negative integer parameter.
func paramUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		return uint64(x), x >= 0
	case uint64:
		return x, true
	case float64: // JSON: integers a float64 holds exactly
		if x < 0 || x > 1<<53 || x != math.Trunc(x) {
			return 0, false
		}
		return uint64(x), true
	}
	return 0, false
}

// usesSharedMemory reports whether an input or an output of req names a region.
func usesSharedMemory(req *InferRequest) bool {
	return slices.ContainsFunc(req.Inputs, func(t Tensor) bool { return t.SharedMemory != nil }) ||
		slices.ContainsFunc(req.Outputs, func(o RequestedOutput) bool { return o.SharedMemory != nil })
}

// inferShared runs a request with inputs or outputs in shared memory: it holds every
// region it names, reads the inputs (a copy: the client may write the region while
// the model runs, and a kernel must never read memory that can vanish), runs the
// request, and writes the outputs named into their regions. The outputs keep their
// data; SharedMemory tells the protocols not to send it.
func (s *Service) inferShared(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	h := &shmHold{r: s.shm}
	defer h.release()
	for _, o := range req.Outputs { // before the model runs: a missing region costs nothing
		if o.SharedMemory != nil {
			if _, err := h.acquire(fmt.Sprintf("output %q", o.Name), o.SharedMemory.Region); err != nil {
				return nil, err
			}
		}
	}
	cp := *req
	cp.Inputs = slices.Clone(req.Inputs)
	for i := range cp.Inputs {
		in := &cp.Inputs[i]
		ref := in.SharedMemory
		if ref == nil {
			continue
		}
		what := fmt.Sprintf("input %q", in.Name)
		if in.Data != nil {
			return nil, fmt.Errorf("%w: %s has both data and %s", ErrInvalid, what, shmRegionParam)
		}
		if err := checkShmSize(in, ref); err != nil {
			return nil, err
		}
		reg, err := h.acquire(what, ref.Region)
		if err != nil {
			return nil, err
		}
		b, err := reg.read(what, ref)
		if err != nil {
			return nil, err
		}
		if in.Data, err = WrapRaw(in.Name, in.Datatype, in.Shape, b); err != nil {
			return nil, fmt.Errorf("shared memory region %q: %w", ref.Region, err)
		}
	}
	resp, err := s.inferModel(ctx, &cp)
	if err != nil {
		return nil, err
	}
	for _, o := range req.Outputs {
		ref := o.SharedMemory
		if ref == nil {
			continue
		}
		i := slices.IndexFunc(resp.Outputs, func(t Tensor) bool { return t.Name == o.Name })
		if i < 0 {
			continue // the model has no such output: the model's own check answered already
		}
		out := &resp.Outputs[i]
		what := fmt.Sprintf("output %q", o.Name)
		b, err := EncodeRaw(out.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := h.held[ref.Region].write(what, ref, b); err != nil {
			return nil, err
		}
		out.SharedMemory = &SharedMemoryRef{Region: ref.Region, Offset: ref.Offset, ByteSize: uint64(len(b))}
	}
	return resp, nil
}

// checkShmSize refuses an input whose shared_memory_byte_size is not what its
// datatype and shape take, before its bytes are read (BYTES elements have no fixed
// size: the region bounds them).
func checkShmSize(in *Tensor, ref *SharedMemoryRef) error {
	dt, err := DTypeOf(in.Datatype)
	if err != nil {
		return fmt.Errorf("input %q: %w", in.Name, err)
	}
	n, err := CheckShape(in.Name, in.Shape)
	if err != nil || dt == tensor.String {
		return err
	}
	if want := uint64(n) * uint64(dt.Size()); ref.ByteSize != want {
		return fmt.Errorf("%w: input %q: shared_memory_byte_size %d for %s%v, which takes %d bytes", ErrInvalid, in.Name, ref.ByteSize, in.Datatype, in.Shape, want)
	}
	return nil
}
