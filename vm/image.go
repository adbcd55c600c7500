package vm

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// imageKey is an image storage's device, size in texels and format: the pool reuses
// an image only for a request with the same key.
type imageKey struct {
	dev           int
	width, height int
	format        devices.ImageFormat
}

func (k imageKey) String() string {
	return fmt.Sprintf("%dx%d %s image on device %d", k.width, k.height, k.format, k.dev)
}

// bytes is the image's size: width·height texels.
func (k imageKey) bytes() int64 { return int64(k.width) * int64(k.height) * k.format.TexelBytes() }

// imageFormat is the texel format of an image of element type dt: four lanes of it.
func imageFormat(dt tensor.DType) (devices.ImageFormat, bool) {
	switch dt {
	case tensor.Float32:
		return devices.ImageRGBAF32, true
	case tensor.Float16:
		return devices.ImageRGBAF16, true
	}
	return 0, false
}

// maxImageSide bounds an image's width and height in an executable (devices report
// their own, smaller, limits at allocation).
const maxImageSide = 1 << 20

// imageOf reads the image an AllocStorage or DeviceCopy asks for: Shape [width, height]
// and DType f32 or f16 (texels of four lanes). ok is false for a buffer (no Shape).
func imageOf(in *Instr) (k imageKey, ok bool, err error) {
	if len(in.Shape) == 0 {
		return imageKey{}, false, nil
	}
	if len(in.Shape) != 2 {
		return imageKey{}, false, fmt.Errorf("an image shape must be [width, height], got %v", in.Shape)
	}
	w, h := in.Shape[0], in.Shape[1]
	if w < 1 || h < 1 || w > maxImageSide || h > maxImageSide {
		return imageKey{}, false, fmt.Errorf("image %dx%d: each side must be in [1, %d]", w, h, maxImageSide)
	}
	f, fok := imageFormat(in.DType)
	if !fok {
		return imageKey{}, false, fmt.Errorf("image of %v: texels are four f32 or four f16", in.DType)
	}
	return imageKey{dev: in.Device, width: int(w), height: int(h), format: f}, true, nil
}

// verifyImage checks an AllocStorage or DeviceCopy that may name an image: a malformed
// shape, a run-time size, or (for AllocStorage) a byte count other than the image's.
func verifyImage(in *Instr) error {
	k, ok, err := imageOf(in)
	if err != nil || !ok {
		return err
	}
	if in.Op == AllocStorage && (len(in.Args) != 0 || in.Imm != k.bytes()) {
		return fmt.Errorf("%v: an image storage has %d bytes and no run-time size, not %d bytes and %d registers", k, k.bytes(), in.Imm, len(in.Args))
	}
	return nil
}

// allocImage takes an image storage for the call, within its RequestBytes limit.
func (c *call) allocImage(k imageKey, what string) (*Storage, error) {
	n := k.bytes()
	if err := c.reserve(n, what); err != nil {
		return nil, err
	}
	s, err := c.m.pool.getImage(k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.storages = append(c.storages, s)
	c.held += n
	return s, nil
}

// imageCopy copies tensor v into a new image storage of the call: within the device
// (Copy, buffer to image or image to image) when v is there, else through the host.
func (c *call) imageCopy(v Value, k imageKey) (*Tensor, error) {
	s, err := c.allocImage(k, "a copy to an image")
	if err != nil {
		return nil, err
	}
	if t, ok := v.(*Tensor); ok && t.Storage.Device == k.dev {
		if t.Bytes() > s.Size {
			return nil, fmt.Errorf("a %v%v tensor (%d bytes) does not fit a %v", t.DType, t.Shape, t.Bytes(), k)
		}
		src, err := c.view(t)
		if err != nil {
			return nil, err
		}
		if t.Storage.img == nil || *t.Storage.img == k {
			if err := c.m.devs[k.dev].Copy(s.Buf, src); err != nil {
				return nil, err
			}
			return &Tensor{Storage: s, DType: t.DType, Shape: append([]int64{}, t.Shape...)}, nil
		}
	}
	h, err := c.host(v)
	if err != nil {
		return nil, err
	}
	raw, ok := h.NativeBytes()
	if !ok {
		if raw, err = h.Raw(); err != nil {
			return nil, err
		}
	}
	if int64(len(raw)) > s.Size {
		return nil, fmt.Errorf("a %v%v tensor (%d bytes) does not fit a %v", h.DType, h.Shape, len(raw), k)
	}
	if err := c.m.devs[k.dev].CopyIn(s.Buf, raw); err != nil {
		return nil, err
	}
	return &Tensor{Storage: s, DType: h.DType, Shape: int64Shape(h.Shape)}, nil
}

// capacity is the bytes a kernel may touch through t: an image's width·height·4
// elements of t's type, else t's own bytes.
func (t *Tensor) capacity() int64 {
	if k := t.Storage.img; k != nil {
		return int64(k.width) * int64(k.height) * 4 * int64(t.DType.Size())
	}
	return t.Bytes()
}

// getImage hands out an image storage: the most recently freed image of the same key,
// or a new one from the device (retried once after returning every whole free buffer).
func (p *pool) getImage(k imageKey) (*Storage, error) {
	if k.dev < 0 || k.dev >= len(p.devs) {
		return nil, fmt.Errorf("a %v of %d devices", k, len(p.devs))
	}
	im, ok := p.devs[k.dev].(devices.Imager)
	if !ok {
		return nil, fmt.Errorf("a %v: device %d (%s) has no images", k, k.dev, p.devs[k.dev].Info().Kind)
	}
	s := &Storage{Device: k.dev, Size: k.bytes(), img: &k}
	p.mu.Lock()
	if l := p.images[k]; len(l) > 0 {
		b := l[len(l)-1]
		p.images[k] = l[:len(l)-1]
		if !b.free || b.owner != nil {
			panic(fmt.Sprintf("BUG: the free images hold a handed-out %v", k))
		}
		b.free, b.owner = false, s
		s.blk, s.root, s.Buf = b, b.par.buf, b.par.buf
		p.st.Hits++
		p.st.Free -= b.size
		p.st.InUse += b.size
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	buf, err := im.AllocImage(k.width, k.height, k.format)
	if err != nil {
		if p.trim() == 0 {
			return nil, err
		}
		if buf, err = im.AllocImage(k.width, k.height, k.format); err != nil {
			return nil, err
		}
	}
	par := &parent{dev: k.dev, buf: buf, size: k.bytes(), image: &k}
	b := &block{par: par, size: par.size, owner: s}
	par.first = b
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parents[par] = struct{}{}
	s.blk, s.root, s.Buf = b, buf, buf
	p.st.Misses++
	p.st.Allocs++
	p.st.Buffers++
	p.st.Held += par.size
	p.st.InUse += par.size
	return s, nil
}

// putImageLocked makes a returned image block free, most recently freed last in its
// key's list.
func (p *pool) putImageLocked(b *block) {
	k := *b.par.image
	p.seq++
	b.seq = p.seq
	p.images[k] = append(p.images[k], b)
}

// removeImageLocked takes a free image block out of its key's list.
func (p *pool) removeImageLocked(b *block) {
	k := *b.par.image
	l := p.images[k]
	i := slices.Index(l, b)
	if i < 0 {
		panic(fmt.Sprintf("BUG: a free %v is not listed", k))
	}
	if l = slices.Delete(l, i, i+1); len(l) == 0 {
		delete(p.images, k)
	} else {
		p.images[k] = l
	}
}

// freeImagesLocked lists every free image block.
func (p *pool) freeImagesLocked() []*block {
	var out []*block
	for _, l := range p.images {
		out = append(out, l...)
	}
	return out
}
