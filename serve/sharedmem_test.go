package serve

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestSharedMemoryKeyIsANameNeverAPath: traversals, paths, NUL, empty and over-long
// keys, a symlink in the shared memory directory to a file outside it (or to an
// object inside it), a FIFO and a directory are all refused with ErrInvalid naming
// the region; the outside file is neither read nor written, and registering a FIFO
// does not block.
func TestSharedMemoryKeyIsANameNeverAPath(t *testing.T) {
	hostile, outside := testdata.HostileSharedMemory(t)
	before, _ := os.ReadFile(outside)
	r := newShmRegistry("")
	defer r.close()
	keys := append([]string{}, testdata.HostileSharedMemoryKeys...)
	for _, k := range hostile {
		keys = append(keys, k)
	}
	for _, key := range keys {
		err := r.register("region-a", key, 0, 16)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `shared memory region "region-a"`) {
			t.Errorf("key %q: %v, want ErrInvalid naming the region", key, err)
		}
	}
	for kind, key := range hostile { // refused as what they are, not for their size
		if err := r.register("region-a", key, 0, 0x1p20); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), errNotShmObject.Error()) {
			t.Errorf("%s: %v", kind, err)
		}
	}
	if st, _ := r.status(""); len(st) != 0 {
		t.Fatalf("hostile keys registered: %+v", st)
	}
	if after, _ := os.ReadFile(outside); !bytes.Equal(before, after) {
		t.Fatal("the file outside the shared memory directory changed")
	}
}

// TestSharedMemoryRegionNamesAreNames: a region name follows the rule of model names;
// a bad one is refused without being echoed.
func TestSharedMemoryRegionNamesAreNames(t *testing.T) {
	key, _ := testdata.SharedMemoryObject(t, 64)
	r := newShmRegistry("")
	defer r.close()
	refused := 0
	for _, name := range append([]string{""}, testdata.HostileModelNames...) {
		err := r.register(name, key, 0, 64)
		if err == nil { // a plain name that only looks odd ("%2E%2E", "evil-link")
			if strings.ContainsAny(name, "/\\\x00\n") || strings.HasPrefix(name, ".") || len(name) > 255 || !utf8.ValidString(name) {
				t.Errorf("region name %q registered", name)
			}
			r.unregister(name)
			continue
		}
		refused++
		if !errors.Is(err, errBadRegionName) {
			t.Errorf("region name %q: %v", name, err)
		}
		if name != "" && err != nil && strings.Contains(err.Error(), name) {
			t.Errorf("the refusal echoes the name %q", name)
		}
	}
	if refused < 30 {
		t.Fatalf("%d hostile region names refused", refused)
	}
}

// TestSharedMemoryRegionMustFitItsObject: a region past the end of its object, an
// offset + size that overflows and an empty region are refused at registration.
func TestSharedMemoryRegionMustFitItsObject(t *testing.T) {
	key, _ := testdata.SharedMemoryObject(t, 64)
	r := newShmRegistry("")
	defer r.close()
	for _, c := range []struct{ offset, size uint64 }{{32, 64}, {0, 65}, {64, 1}, {math.MaxUint64, 2}, {2, math.MaxUint64}, {0, 0}} {
		if err := r.register("small", key, c.offset, c.size); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"small"`) {
			t.Errorf("offset %d byte_size %d: %v", c.offset, c.size, err)
		}
	}
	if err := r.register("small", key, 32, 32); err != nil {
		t.Fatal(err)
	}
	if err := r.register("small", key, 0, 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second registration of one name: %v", err)
	}
}

// TestSharedMemoryAccessStaysInsideItsRegion: a tensor's offset and size are checked
// against the region (overflow included), not only against the object.
func TestSharedMemoryAccessStaysInsideItsRegion(t *testing.T) {
	key, path := testdata.SharedMemoryObject(t, 256)
	os.WriteFile(path, bytes.Repeat([]byte{7}, 256), 0o600)
	r := newShmRegistry("")
	defer r.close()
	if err := r.register("mid", key, 64, 64); err != nil {
		t.Fatal(err)
	}
	h := &shmHold{r: r}
	defer h.release()
	reg, err := h.acquire("input \"x\"", "mid")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []SharedMemoryRef{{"mid", 0, 65}, {"mid", 64, 1}, {"mid", 60, 8}, {"mid", math.MaxUint64, 2}, {"mid", 1, math.MaxUint64}} {
		if _, err := reg.read("input \"x\"", &ref); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"mid"`) {
			t.Errorf("read %+v: %v", ref, err)
		}
		if err := reg.write("output \"y\"", &SharedMemoryRef{"mid", ref.Offset, math.MaxUint64}, make([]byte, ref.ByteSize%1024)); ref.ByteSize < 1024 && !errors.Is(err, ErrInvalid) {
			t.Errorf("write %+v: %v", ref, err)
		}
	}
	if err := reg.write("output \"y\"", &SharedMemoryRef{"mid", 8, 4}, []byte{1, 2, 3, 4, 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an output larger than its shared_memory_byte_size: %v", err)
	}
	if err := reg.write("output \"y\"", &SharedMemoryRef{"mid", 8, 4}, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	b, err := reg.read("input \"x\"", &SharedMemoryRef{"mid", 0, 64})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{7}, 64)
	copy(want[8:], []byte{1, 2, 3, 4})
	if !bytes.Equal(b, want) {
		t.Fatalf("region bytes %v", b)
	}
	if whole, _ := os.ReadFile(path); !bytes.Equal(whole[64+8:64+12], []byte{1, 2, 3, 4}) || whole[63] != 7 || whole[128] != 7 {
		t.Fatal("the write landed outside its place")
	}
}

// TestTruncatedObjectFailsTheRequestNotTheProcess: an object that shrinks after its
// region is registered makes reads and writes fail with ErrInvalid naming the region
// (a mapping would have faulted the process).
func TestTruncatedObjectFailsTheRequestNotTheProcess(t *testing.T) {
	key, path := testdata.SharedMemoryObject(t, 4096)
	r := newShmRegistry("")
	defer r.close()
	if err := r.register("shrinks", key, 1024, 2048); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1500); err != nil {
		t.Fatal(err)
	}
	h := &shmHold{r: r}
	defer h.release()
	reg, err := h.acquire("input \"x\"", "shrinks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.read("input \"x\"", &SharedMemoryRef{"shrinks", 0, 1024}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"shrinks"`) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("read: %v", err)
	}
	if err := reg.write("output \"y\"", &SharedMemoryRef{"shrinks", 0, 1024}, make([]byte, 1024)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("write: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != 1500 {
		t.Fatalf("a refused write changed the object's size to %d", st.Size())
	}
}

// TestUnregisteredRegionServesTheRequestHoldingIt: a region unregistered while a
// request holds it stays usable by that request, is gone for new requests, and its
// descriptor closes when the request ends.
func TestUnregisteredRegionServesTheRequestHoldingIt(t *testing.T) {
	key, _ := testdata.SharedMemoryObject(t, 64)
	r := newShmRegistry("")
	defer r.close()
	if err := r.register("held", key, 0, 64); err != nil {
		t.Fatal(err)
	}
	h := &shmHold{r: r}
	reg, err := h.acquire("input \"x\"", "held")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.unregister("held"); err != nil {
		t.Fatal(err)
	}
	if err := reg.write("output \"y\"", &SharedMemoryRef{"held", 0, 8}, []byte("12345678")); err != nil {
		t.Fatalf("the holding request lost its region: %v", err)
	}
	if _, err := (&shmHold{r: r}).acquire("input \"x\"", "held"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a new request found the unregistered region: %v", err)
	}
	if _, err := reg.file.Stat(); err != nil {
		t.Fatalf("closed while held: %v", err)
	}
	h.release()
	if _, err := reg.file.Stat(); err == nil {
		t.Fatal("the descriptor outlived the last request holding it")
	}
}

// TestSharedMemoryParams: the three parameters as the protocols carry them.
func TestSharedMemoryParams(t *testing.T) {
	ok := []struct {
		p    map[string]any
		want *SharedMemoryRef
	}{
		{nil, nil},
		{map[string]any{"binary_data": true}, nil},
		{map[string]any{"shared_memory_region": "r", "shared_memory_byte_size": float64(96)}, &SharedMemoryRef{"r", 0, 96}},
		{map[string]any{"shared_memory_region": "r", "shared_memory_byte_size": int64(96), "shared_memory_offset": uint64(8)}, &SharedMemoryRef{"r", 8, 96}},
	}
	for _, c := range ok {
		got, err := SharedMemoryOf("input \"x\"", c.p)
		if err != nil || (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%v: %+v, %v", c.p, got, err)
		}
	}
	for _, p := range []map[string]any{
		{"shared_memory_region": "r"},
		{"shared_memory_byte_size": float64(4)},
		{"shared_memory_offset": float64(4)},
		{"shared_memory_region": 3, "shared_memory_byte_size": float64(4)},
		{"shared_memory_region": "r", "shared_memory_byte_size": float64(-4)},
		{"shared_memory_region": "r", "shared_memory_byte_size": 4.5},
		{"shared_memory_region": "r", "shared_memory_byte_size": float64(1 << 60)},
		{"shared_memory_region": "r", "shared_memory_byte_size": int64(-1)},
		{"shared_memory_region": "r", "shared_memory_byte_size": "4"},
		{"shared_memory_region": "r", "shared_memory_byte_size": int64(4), "shared_memory_offset": int64(-8)},
	} {
		if _, err := SharedMemoryOf("input \"x\"", p); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `input "x"`) {
			t.Errorf("%v: %v", p, err)
		}
	}
}
