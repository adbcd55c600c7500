package serve

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/kilnrt/kiln/serve/modelrepo"
)

// Triton's system shared memory extension. A client registers a region: a name of its
// choosing for bytes [offset, offset+byte_size) of a POSIX shared memory object, named
// by its key (the object is <dir>/<key>, dir being Options.SharedMemoryDir, /dev/shm by
// default). An inference input or output then names a region, an offset in it and a
// byte size (the parameters shared_memory_region, shared_memory_offset,
// shared_memory_byte_size) instead of carrying data: inputs are read from the region
// before the model runs, outputs written into it after, and the response says where
// instead of carrying the bytes.
//
// Invariants: a key is a name, never a path (validKey); the object is opened once, at
// registration, without following a symlink, inside dir only, and must be a regular
// file (sharedmem_unix.go); every access is bounded by the region with overflow-free
// arithmetic and re-checked against the object's size at that moment, and goes
// through pread/pwrite on the descriptor, never through a mapping, so an object
// truncated by its owner makes a request fail with ErrInvalid, never the process fault
// (a mapped page past the end of a file is SIGBUS). A request holds the regions it
// uses: a region unregistered meanwhile keeps its descriptor until the last request
// holding it ends.

// Parameters of the shared memory extension on an input or output.
const (
	shmRegionParam   = "shared_memory_region"
	shmOffsetParam   = "shared_memory_offset"
	shmByteSizeParam = "shared_memory_byte_size"
)

// DefaultSharedMemoryDir is where POSIX shared memory objects live on Linux.
const DefaultSharedMemoryDir = "/dev/shm"

// maxShmKey is the longest key: a file name (NAME_MAX).
const maxShmKey = 255

// SharedMemoryRef places a tensor in a registered region: ByteSize bytes from Offset,
// which counts from the region's start.
type SharedMemoryRef struct {
	Region   string
	Offset   uint64
	ByteSize uint64
}

// SharedMemoryRegion is a registered region as the status call reports it.
type SharedMemoryRegion struct {
	Name, Key        string
	Offset, ByteSize uint64
}

// errBadRegionName is the one refusal for a region name that is not a valid name,
// whatever the reason: it does not echo the name.
var errBadRegionName = fmt.Errorf("%w: a shared memory region name is one name of at most 255 bytes without separators, control characters or a leading dot", ErrInvalid)

// validRegionName: region names follow the rule of model names, so that only such
// names reach logs and errors.
func validRegionName(name string) bool { return modelrepo.ValidModelName(name) }

// validKey reports whether key names a shared memory object: an optional leading "/"
// (POSIX shm_open's spelling), then one file name of at most 255 bytes that is not "."
// or "..", without "/", NUL or control characters, in valid UTF-8. It returns the
// file name.
func validKey(key string) (string, bool) {
	name := key
	if len(name) > 0 && name[0] == '/' {
		name = name[1:]
	}
	if name == "" || name == "." || name == ".." || len(name) > maxShmKey {
		return "", false
	}
	for _, r := range name {
		if r == '/' || r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return "", false
		}
	}
	return name, true
}

// shmRegion is a registered region: its object's descriptor, and how many requests
// hold it.
type shmRegion struct {
	SharedMemoryRegion
	file     *os.File
	refs     int  // requests holding it, guarded by the registry's mutex
	released bool // unregistered: closes with the last request
}

// shmRegistry is the service's registered regions.
type shmRegistry struct {
	dir     string
	mu      sync.Mutex
	regions map[string]*shmRegion
}

func newShmRegistry(dir string) *shmRegistry {
	if dir == "" {
		dir = DefaultSharedMemoryDir
	}
	return &shmRegistry{dir: dir, regions: map[string]*shmRegion{}}
}

// register opens the object and records the region; the region must lie inside the
// object as it is now.
func (r *shmRegistry) register(name, key string, offset, byteSize uint64) error {
	if !validRegionName(name) {
		return errBadRegionName
	}
	file, ok := validKey(key)
	if !ok {
		return fmt.Errorf("%w: shared memory region %q: the key is not a shared memory object's name (one name, optionally after a \"/\", of at most %d bytes, not \".\" or \"..\", without \"/\" or control characters)", ErrInvalid, name, maxShmKey)
	}
	if byteSize == 0 {
		return fmt.Errorf("%w: shared memory region %q: byte_size is 0", ErrInvalid, name)
	}
	end, ok := addU64(offset, byteSize)
	if !ok {
		return fmt.Errorf("%w: shared memory region %q: offset %d + byte_size %d overflows", ErrInvalid, name, offset, byteSize)
	}
	f, err := openShm(r.dir, file)
	if err != nil {
		return fmt.Errorf("%w: shared memory region %q: key %q: %v", ErrInvalid, name, key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("%w: shared memory region %q: key %q: %v", ErrInvalid, name, key, err)
	}
	if size := st.Size(); size < 0 || end > uint64(size) {
		f.Close()
		return fmt.Errorf("%w: shared memory region %q: offset %d + byte_size %d is past the end of the object %q (%d bytes)", ErrInvalid, name, offset, byteSize, key, size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.regions[name]; dup {
		f.Close()
		return fmt.Errorf("%w: shared memory region %q is already registered (unregister it first)", ErrInvalid, name)
	}
	r.regions[name] = &shmRegion{SharedMemoryRegion: SharedMemoryRegion{Name: name, Key: key, Offset: offset, ByteSize: byteSize}, file: f}
	return nil
}

// unregister forgets a region ("": every region); requests holding it keep it until
// they end. An unknown name is not an error (as in Triton).
func (r *shmRegistry) unregister(name string) error {
	if name != "" && !validRegionName(name) {
		return errBadRegionName
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, reg := range r.regions {
		if name != "" && n != name {
			continue
		}
		delete(r.regions, n)
		reg.released = true
		if reg.refs == 0 {
			reg.file.Close()
		}
	}
	return nil
}

// status lists the regions ("": every region, by name).
func (r *shmRegistry) status(name string) ([]SharedMemoryRegion, error) {
	if name != "" && !validRegionName(name) {
		return nil, errBadRegionName
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != "" {
		reg, ok := r.regions[name]
		if !ok {
			return nil, fmt.Errorf("%w: no shared memory region %q is registered", ErrNotFound, name)
		}
		return []SharedMemoryRegion{reg.SharedMemoryRegion}, nil
	}
	var out []SharedMemoryRegion
	for _, n := range slices.Sorted(maps.Keys(r.regions)) {
		out = append(out, r.regions[n].SharedMemoryRegion)
	}
	return out, nil
}

// close unregisters every region (at the service's Close).
func (r *shmRegistry) close() { r.unregister("") }

// shmHold is the regions one request uses, held until release.
type shmHold struct {
	r    *shmRegistry
	held map[string]*shmRegion
}

// acquire holds a region for the request; what names the tensor for errors.
func (h *shmHold) acquire(what, name string) (*shmRegion, error) {
	if reg, ok := h.held[name]; ok {
		return reg, nil
	}
	if !validRegionName(name) {
		return nil, fmt.Errorf("%s: %w", what, errBadRegionName)
	}
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	reg, ok := h.r.regions[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s: no shared memory region %q is registered", ErrInvalid, what, name)
	}
	reg.refs++
	if h.held == nil {
		h.held = map[string]*shmRegion{}
	}
	h.held[name] = reg
	return reg, nil
}

// release lets go of every region the request held.
func (h *shmHold) release() {
	if len(h.held) == 0 {
		return
	}
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	for _, reg := range h.held {
		reg.refs--
		if reg.refs == 0 && reg.released {
			reg.file.Close()
		}
	}
	h.held = nil
}

// span checks that ref's bytes lie inside the region and inside the object as it is
// now, and returns their offset in the object. n is the byte count accessed.
func (reg *shmRegion) span(what string, ref *SharedMemoryRef, n uint64) (int64, error) {
	end, ok := addU64(ref.Offset, n)
	if !ok || end > reg.ByteSize {
		return 0, fmt.Errorf("%w: %s: shared_memory_offset %d + %d bytes is past the end of shared memory region %q (%d bytes)", ErrInvalid, what, ref.Offset, n, reg.Name, reg.ByteSize)
	}
	at := reg.Offset + ref.Offset // <= reg.Offset + reg.ByteSize, checked at registration
	st, err := reg.file.Stat()
	if err != nil {
		return 0, fmt.Errorf("%w: %s: shared memory region %q: %v", ErrInvalid, what, reg.Name, err)
	}
	if size := st.Size(); size < 0 || at+n > uint64(size) || at > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s: shared memory region %q: its object %q now holds %d bytes, fewer than the region's offset %d + byte_size %d (truncated after registration)", ErrInvalid, what, reg.Name, reg.Key, size, reg.Offset, reg.ByteSize)
	}
	return int64(at), nil
}

// read returns a copy of ref's bytes (ref.ByteSize of them).
func (reg *shmRegion) read(what string, ref *SharedMemoryRef) ([]byte, error) {
	at, err := reg.span(what, ref, ref.ByteSize)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, ref.ByteSize)
	if _, err := reg.file.ReadAt(buf, at); err != nil {
		// the object shrank between the size check and the read
		return nil, fmt.Errorf("%w: %s: reading shared memory region %q: %v", ErrInvalid, what, reg.Name, err)
	}
	return buf, nil
}

// write puts b at ref's place; b must fit ref.ByteSize.
func (reg *shmRegion) write(what string, ref *SharedMemoryRef, b []byte) error {
	if uint64(len(b)) > ref.ByteSize {
		return fmt.Errorf("%w: %s needs %d bytes, shared_memory_byte_size gives %d in region %q", ErrInvalid, what, len(b), ref.ByteSize, reg.Name)
	}
	at, err := reg.span(what, ref, uint64(len(b)))
	if err != nil {
		return err
	}
	if _, err := reg.file.WriteAt(b, at); err != nil {
		return fmt.Errorf("%w: %s: writing shared memory region %q: %v", ErrInvalid, what, reg.Name, err)
	}
	return nil
}

func addU64(a, b uint64) (uint64, bool) {
	s := a + b
	return s, s >= a
}
