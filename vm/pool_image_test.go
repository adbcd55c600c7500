package vm

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// imager is slicer with images: an image is a whole fake buffer of its bytes.
type imager struct{ slicer }

func (d imager) AllocImage(w, h int, f devices.ImageFormat) (devices.Buffer, error) {
	return d.Alloc(int64(w) * int64(h) * f.TexelBytes())
}

func (d imager) ImageLimits() (int, int) { return 1 << 14, 1 << 14 }

// TestPoolReusesWholeImagesOfEqualKeyOnly: an image request is a hit only on a free
// image of the same size and format, never on a buffer or a larger image, and a buffer
// request never takes an image; images are released by the budget and by trim.
func TestPoolReusesWholeImagesOfEqualKeyOnly(t *testing.T) {
	d := newFakeDev()
	p := newPool([]devices.Device{imager{slicer{d}}})
	k := imageKey{width: 8, height: 4, format: devices.ImageRGBAF32}
	get := func(k imageKey) *Storage {
		t.Helper()
		s, err := p.getImage(k)
		if err != nil {
			t.Fatal(err)
		}
		if s.img == nil || *s.img != k || s.Size != k.bytes() || s.Buf.Size() != k.bytes() {
			t.Fatalf("%v: storage %+v", k, s)
		}
		return s
	}
	a := get(k)
	p.put(a)
	checked(t, p, d)
	buf := mustGet(t, p, 64) // smaller than the free image: must not take it
	if buf.img != nil || d.allocs != 2 {
		t.Fatalf("a buffer request took an image (%d device allocations)", d.allocs)
	}
	p.put(buf)
	wide := k
	wide.width = 4 // 4x4: fits in the free 8x4 image's bytes, but another key
	b := get(wide)
	if d.allocs != 3 {
		t.Fatalf("a 4x4 image reused an 8x4 one (%d device allocations)", d.allocs)
	}
	c := get(k)
	if d.allocs != 3 || p.st.Hits != 1 {
		t.Fatalf("an 8x4 image was not reused: %d allocations, %+v", d.allocs, p.st)
	}
	p.put(b)
	p.put(c)
	checked(t, p, d)
	p.mu.Lock()
	p.budget = k.bytes() // keeps the most recently freed image only
	rel := p.overBudgetLocked()
	p.mu.Unlock()
	p.release(rel)
	checked(t, p, d)
	if p.st.Free > k.bytes() || len(p.images[k]) != 1 {
		t.Fatalf("over budget: %+v, %d free 8x4 images", p.st, len(p.images[k]))
	}
	if n := p.trim(); n != k.bytes() || p.st.Held != 0 || d.liveBytes() != 0 || len(p.images) != 0 {
		t.Fatalf("trim returned %d bytes; %+v, %d live bytes, %d image keys", n, p.st, d.liveBytes(), len(p.images))
	}
	checked(t, p, d)
	e := get(k)
	p.drain()
	p.put(e) // returned after drain: released at once
	if d.liveBytes() != 0 {
		t.Fatalf("an image returned after drain is kept: %d live bytes", d.liveBytes())
	}
	checked(t, p, d)
}

// TestTheFormatBeforeImageStoragesIsAVersionMiss: a file of format 5, where an
// AllocStorage's shape meant nothing, is ErrVersion, a cache miss.
func TestTheFormatBeforeImageStoragesIsAVersionMiss(t *testing.T) {
	b, err := sampleConsts().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b[8] = 5
	var x Executable
	if err := x.UnmarshalBinary(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("format 5: %v", err)
	}
}
