package opencl

import (
	"fmt"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
)

// imageShape is an image's size in texels and its texel format.
type imageShape struct {
	width, height int
	format        devices.ImageFormat
}

func (s *imageShape) String() string {
	return fmt.Sprintf("%dx%d %s image", s.width, s.height, s.format)
}

// ImageShape implements devices.Image: width and height in texels and the format; zeros
// for a buffer.
func (b *buffer) ImageShape() (width, height int, format devices.ImageFormat) {
	if b.img == nil {
		return 0, 0, 0
	}
	return b.img.width, b.img.height, b.img.format
}

// ImageLimits implements devices.Imager: CL_DEVICE_IMAGE2D_MAX_WIDTH and _HEIGHT, or
// zeros when the device has no images.
func (d *Device) ImageLimits() (maxWidth, maxHeight int) {
	return d.dinfo.Facts.ImageMaxWidth, d.dinfo.Facts.ImageMaxHeight
}

// clImageFormat is the cl_image_format of f: channel order and channel type.
func clImageFormat(f devices.ImageFormat) ([2]uint32, bool) {
	switch f {
	case devices.ImageRGBAF32:
		return [2]uint32{channelOrderRGBA, channelTypeFloat}, true
	case devices.ImageRGBAF16:
		return [2]uint32{channelOrderRGBA, channelTypeHalfFloat}, true
	}
	return [2]uint32{}, false
}

// AllocImage implements devices.Imager: a zeroed read-write image2d of width×height
// texels. The size is checked against the device's image2d limits and the format
// against clGetSupportedImageFormats (RGBA half also needs cl_khr_fp16).
func (d *Device) AllocImage(width, height int, format devices.ImageFormat) (devices.Buffer, error) {
	shape := &imageShape{width: width, height: height, format: format}
	mw, mh := d.ImageLimits()
	switch {
	case mw == 0 || mh == 0:
		return nil, fmt.Errorf("%w: a %s on %s, which has no images", devices.ErrBadBuffer, shape, d.where)
	case width < 1 || height < 1 || width > mw || height > mh:
		return nil, fmt.Errorf("%w: a %s on %s: width must be in [1, %d] (CL_DEVICE_IMAGE2D_MAX_WIDTH) and height in [1, %d] (CL_DEVICE_IMAGE2D_MAX_HEIGHT)", devices.ErrBadBuffer, shape, d.where, mw, mh)
	}
	cf, ok := clImageFormat(format)
	if !ok {
		return nil, fmt.Errorf("%w: a %s: unknown image format", devices.ErrBadBuffer, shape)
	}
	if format == devices.ImageRGBAF16 && !d.dinfo.Facts.FP16 {
		return nil, fmt.Errorf("%w: a %s on %s, which lacks cl_khr_fp16", devices.ErrBadBuffer, shape, d.where)
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	supported, err := d.supportsImageFormat(cf)
	if err != nil {
		return nil, fmt.Errorf("%w: a %s: %v", devices.ErrBadBuffer, shape, err)
	}
	if !supported {
		return nil, fmt.Errorf("%w: a %s: %s does not support the format for read-write 2-D images (clGetSupportedImageFormats)", devices.ErrBadBuffer, shape, d.where)
	}
	a := d.api
	// cl_image_desc: image_type (cl_uint, padded), width, height, depth, array_size,
	// row_pitch, slice_pitch (size_t), num_mip_levels, num_samples (cl_uint), buffer.
	desc := make([]uintptr, 9)
	desc[0] = memObjectImage2D
	desc[1], desc[2] = uintptr(width), uintptr(height)
	mem, s := a.create(a.createImage, d.ctx, memReadWrite, uintptr(unsafe.Pointer(&cf[0])), uintptr(unsafe.Pointer(&desc[0])), 0)
	if s != success {
		return nil, fmt.Errorf("%w: allocating a %s on %s: %v", devices.ErrBadBuffer, shape, d.where, check("clCreateImage", s))
	}
	zero := new([4]float32)
	origin, region := new([3]uintptr), &[3]uintptr{uintptr(width), uintptr(height), 1}
	if err := check("clEnqueueFillImage", a.call(a.enqueueFillImage, d.queue, mem, uintptr(unsafe.Pointer(zero)),
		uintptr(unsafe.Pointer(origin)), uintptr(unsafe.Pointer(region)), 0, 0, 0)); err != nil {
		a.call(a.releaseMemObject, mem)
		return nil, fmt.Errorf("%w: zeroing a %s: %v", devices.ErrBadBuffer, shape, err)
	}
	b := &buffer{mem: mem, size: int64(width) * int64(height) * format.TexelBytes(), img: shape}
	b.root = b
	d.mu.Lock()
	d.alive[b] = true
	d.mu.Unlock()
	return b, nil
}

// supportsImageFormat reports whether the context supports f for read-write 2-D images.
func (d *Device) supportsImageFormat(f [2]uint32) (bool, error) {
	a := d.api
	var n uint32
	if err := check("clGetSupportedImageFormats", a.call(a.getSupportedImageFormats, d.ctx, memReadWrite, memObjectImage2D, 0, 0, uintptr(unsafe.Pointer(&n)))); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	formats := make([][2]uint32, n)
	if err := check("clGetSupportedImageFormats", a.call(a.getSupportedImageFormats, d.ctx, memReadWrite, memObjectImage2D, uintptr(n), uintptr(unsafe.Pointer(&formats[0])), 0)); err != nil {
		return false, err
	}
	for _, g := range formats {
		if g == f {
			return true, nil
		}
	}
	return false, nil
}

// imageRect is a rectangle of texels: origin {x, y, 0} and region {w, h, 1}.
type imageRect struct {
	origin, region [3]uintptr
	bytes          int64 // the rectangle's bytes
}

// imageRects covers the first n bytes of an image in row-major texel order: its whole
// rows, then the texels of a partial row. n must be whole texels.
func imageRects(img *imageShape, n int64) ([]imageRect, error) {
	tb := img.format.TexelBytes()
	if n%tb != 0 {
		return nil, fmt.Errorf("%w: %d bytes of a %s are not whole %d-byte texels", devices.ErrBadBuffer, n, img, tb)
	}
	row := int64(img.width) * tb
	var out []imageRect
	if rows := n / row; rows > 0 {
		out = append(out, imageRect{region: [3]uintptr{uintptr(img.width), uintptr(rows), 1}, bytes: rows * row})
	}
	if rest := n % row; rest > 0 {
		out = append(out, imageRect{origin: [3]uintptr{0, uintptr(n / row), 0}, region: [3]uintptr{uintptr(rest / tb), 1, 1}, bytes: rest})
	}
	return out, nil
}

// writeImage is CopyIn onto an image: blocking writes of src's texels in row-major order.
func (d *Device) writeImage(b *buffer, src []byte) error {
	rects, err := imageRects(b.img, int64(len(src)))
	if err != nil {
		return err
	}
	a := d.api
	off := int64(0)
	for _, r := range rects {
		s := a.call(a.enqueueWriteImage, d.queue, b.mem, clTrue, uintptr(unsafe.Pointer(&r.origin[0])), uintptr(unsafe.Pointer(&r.region[0])),
			0, 0, uintptr(unsafe.Pointer(&src[off])), 0, 0, 0)
		if err := check("clEnqueueWriteImage", s); err != nil {
			return fmt.Errorf("%w: writing a %s: %v", devices.ErrBadBuffer, b.img, err)
		}
		off += r.bytes
	}
	return nil
}

// readImage is CopyOut from an image: blocking reads into dst in row-major texel order.
func (d *Device) readImage(dst []byte, b *buffer) error {
	rects, err := imageRects(b.img, int64(len(dst)))
	if err != nil {
		return err
	}
	a := d.api
	off := int64(0)
	for _, r := range rects {
		s := a.call(a.enqueueReadImage, d.queue, b.mem, clTrue, uintptr(unsafe.Pointer(&r.origin[0])), uintptr(unsafe.Pointer(&r.region[0])),
			0, 0, uintptr(unsafe.Pointer(&dst[off])), 0, 0, 0)
		if err := check("clEnqueueReadImage", s); err != nil {
			return fmt.Errorf("%w: reading a %s: %v", devices.ErrBadBuffer, b.img, err)
		}
		off += r.bytes
	}
	return nil
}

// copyImage is Copy where src or dst is an image: src's bytes, in row-major texel
// order, queued after the work before it. Between two images the shapes and formats
// must be equal.
func (d *Device) copyImage(t, s *buffer) error {
	a := d.api
	switch {
	case s.img != nil && t.img != nil:
		if *s.img != *t.img {
			return fmt.Errorf("%w: copying a %s into a %s", devices.ErrBadBuffer, s.img, t.img)
		}
		origin, region := new([3]uintptr), &[3]uintptr{uintptr(s.img.width), uintptr(s.img.height), 1}
		r := a.call(a.enqueueCopyImage, d.queue, s.mem, t.mem, uintptr(unsafe.Pointer(origin)), uintptr(unsafe.Pointer(origin)), uintptr(unsafe.Pointer(region)), 0, 0, 0)
		if err := check("clEnqueueCopyImage", r); err != nil {
			return fmt.Errorf("%w: %v", devices.ErrBadBuffer, err)
		}
		return nil
	case s.img != nil: // image to buffer
		rects, err := imageRects(s.img, s.size)
		if err != nil {
			return err
		}
		off := t.offset
		for _, rc := range rects {
			r := a.call(a.enqueueCopyImageToBuffer, d.queue, s.mem, t.mem, uintptr(unsafe.Pointer(&rc.origin[0])), uintptr(unsafe.Pointer(&rc.region[0])), uintptr(off), 0, 0, 0)
			if err := check("clEnqueueCopyImageToBuffer", r); err != nil {
				return fmt.Errorf("%w: %v", devices.ErrBadBuffer, err)
			}
			off += rc.bytes
		}
		return nil
	}
	rects, err := imageRects(t.img, s.size) // buffer to image
	if err != nil {
		return err
	}
	off := s.offset
	for _, rc := range rects {
		r := a.call(a.enqueueCopyBufferToImage, d.queue, s.mem, t.mem, uintptr(off), uintptr(unsafe.Pointer(&rc.origin[0])), uintptr(unsafe.Pointer(&rc.region[0])), 0, 0, 0)
		if err := check("clEnqueueCopyBufferToImage", r); err != nil {
			return fmt.Errorf("%w: %v", devices.ErrBadBuffer, err)
		}
		off += rc.bytes
	}
	return nil
}

var (
	_ devices.Imager = (*Device)(nil)
	_ devices.Image  = (*buffer)(nil)
)
