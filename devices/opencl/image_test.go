package opencl

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// imagerOrSkip opens the default device and skips when it has no images.
func imagerOrSkip(t *testing.T) *Device {
	t.Helper()
	d := deviceOrSkip(t)
	if w, h := d.ImageLimits(); w == 0 || h == 0 {
		t.Skipf("%s has no images; skipping", d.Info().Name)
	}
	return d
}

// floatBytes is v as little-endian float32 bytes.
func floatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bytesFloats is the inverse of floatBytes.
func bytesFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ramp is n floats 1, 2, ...
func ramp(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i + 1)
	}
	return v
}

func TestImageRoundTripsTexelsInRowMajorOrder(t *testing.T) {
	d := imagerOrSkip(t)
	const w, h = 5, 3
	img, err := d.AllocImage(w, h, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(img)
	if img.Size() != w*h*16 {
		t.Fatalf("size %d, want %d", img.Size(), w*h*16)
	}
	if gw, gh, f, ok := devices.ImageOf(img); !ok || gw != w || gh != h || f != devices.ImageRGBAF32 {
		t.Fatalf("ImageOf = %d, %d, %v, %v", gw, gh, f, ok)
	}
	zero := make([]byte, img.Size())
	if err := d.CopyOut(zero, img); err != nil {
		t.Fatal(err)
	}
	for i, b := range zero {
		if b != 0 {
			t.Fatalf("a new image has byte %d = %d, want zeroed", i, b)
		}
	}
	want := ramp(w * h * 4)
	if err := d.CopyIn(img, floatBytes(want)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, img.Size())
	if err := d.CopyOut(got, img); err != nil {
		t.Fatal(err)
	}
	if g := bytesFloats(got); !equalFloats(g, want) {
		t.Fatalf("round trip %v, want %v", g, want)
	}
	// a prefix of one row and two texels reaches exactly those texels
	prefix := ramp((w + 2) * 4)
	for i := range prefix {
		prefix[i] = -prefix[i]
	}
	if err := d.CopyIn(img, floatBytes(prefix)); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyOut(got, img); err != nil {
		t.Fatal(err)
	}
	copy(want, prefix)
	if g := bytesFloats(got); !equalFloats(g, want) {
		t.Fatalf("after a prefix write %v, want %v", g, want)
	}
	part := make([]byte, (w+1)*16)
	if err := d.CopyOut(part, img); err != nil {
		t.Fatal(err)
	}
	if g := bytesFloats(part); !equalFloats(g, want[:len(g)]) {
		t.Fatalf("prefix read %v, want %v", g, want[:len(g)])
	}
	if err := d.CopyIn(img, make([]byte, 20)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a copy of part of a texel: %v, want ErrBadBuffer", err)
	}
}

func TestImageCopiesToAndFromBuffers(t *testing.T) {
	d := imagerOrSkip(t)
	const w, h = 7, 2
	img, err := d.AllocImage(w, h, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(img)
	src, err := d.Alloc(img.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(src)
	dst, err := d.Alloc(img.Size() + 64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(dst)
	want := ramp(w * h * 4)
	if err := d.CopyIn(src, floatBytes(want)); err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(img, src); err != nil {
		t.Fatal(err)
	}
	view, err := d.Slice(dst, 64, img.Size())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(view, img); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, img.Size())
	if err := d.CopyOut(got, view); err != nil {
		t.Fatal(err)
	}
	if g := bytesFloats(got); !equalFloats(g, want) {
		t.Fatalf("buffer → image → view %v, want %v", g, want)
	}
	other, err := d.AllocImage(w, h, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(other)
	if err := d.Copy(other, img); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyOut(got, other); err != nil {
		t.Fatal(err)
	}
	if g := bytesFloats(got); !equalFloats(g, want) {
		t.Fatalf("image → image %v, want %v", g, want)
	}
	wide, err := d.AllocImage(w*h, 1, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(wide)
	if err := d.Copy(wide, img); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a copy between images of other shapes: %v, want ErrBadBuffer", err)
	}
	if _, err := d.Slice(img, 0, 16); !errors.Is(err, devices.ErrBadBuffer) || !strings.Contains(err.Error(), "sliced") {
		t.Errorf("a view of an image: %v, want ErrBadBuffer", err)
	}
}

func TestImageLimitsAndFormatsAreChecked(t *testing.T) {
	d := imagerOrSkip(t)
	mw, mh := d.ImageLimits()
	for _, c := range [][2]int{{mw + 1, 1}, {1, mh + 1}, {0, 4}, {4, -1}} {
		_, err := d.AllocImage(c[0], c[1], devices.ImageRGBAF32)
		if !errors.Is(err, devices.ErrBadBuffer) {
			t.Errorf("%dx%d: %v, want ErrBadBuffer", c[0], c[1], err)
			continue
		}
		for _, s := range []string{"CL_DEVICE_IMAGE2D_MAX_WIDTH", "CL_DEVICE_IMAGE2D_MAX_HEIGHT"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%dx%d: %v does not name %s", c[0], c[1], err, s)
			}
		}
	}
	if img, err := d.AllocImage(mw, 1, devices.ImageRGBAF32); err != nil {
		t.Errorf("an image of the widest row: %v", err)
	} else {
		d.Free(img)
	}
	if _, err := d.AllocImage(4, 4, devices.ImageFormat(9)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("an unknown format: %v, want ErrBadBuffer", err)
	}
	img, err := d.AllocImage(4, 4, devices.ImageRGBAF16)
	if !d.Facts().FP16 {
		if !errors.Is(err, devices.ErrBadBuffer) || !strings.Contains(err.Error(), "cl_khr_fp16") {
			t.Errorf("a half image without cl_khr_fp16: %v, want ErrBadBuffer naming it", err)
		}
	} else if err != nil {
		t.Errorf("a half image with cl_khr_fp16: %v", err)
	} else if img.Size() != 4*4*8 {
		t.Errorf("half image size %d, want %d", img.Size(), 4*4*8)
	}
	img, err = d.AllocImage(2, 2, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Free(img); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(img); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a second free: %v, want ErrBadBuffer", err)
	}
	if err := d.CopyIn(img, make([]byte, 16)); !errors.Is(err, devices.ErrBadBuffer) {
		t.Errorf("a copy into a freed image: %v, want ErrBadBuffer", err)
	}
}

// imageSource reads image a, writes image b = 2a+1, and writes buffer out with a's
// texels as floats (the layout a tensor in NCHW4c order has), in the kernel calling
// convention: an image is one cl_mem argument, a buffer a cl_mem and a byte offset.
const imageSource = `
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

__kernel void kiln_test_image(__read_only image2d_t a, __write_only image2d_t b, __global char *out_b, long out_o, long width, long height, __global long *status) {
	__global float *out = (__global float *)(out_b + out_o);
	int x = get_global_id(0), y = get_global_id(1);
	if (x >= width || y >= height)
		return;
	float4 v = read_imagef(a, smp, (int2)(x, y));
	write_imagef(b, (int2)(x, y), 2.0f * v + 1.0f);
	vstore4(v, (size_t)y * (size_t)width + (size_t)x, out);
}
`

func TestKernelReadsAndWritesImages(t *testing.T) {
	d := imagerOrSkip(t)
	mod, err := d.Load([]byte(SourceMarker + imageSource))
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel("kiln_test_image")
	if err != nil {
		t.Fatal(err)
	}
	const w, h = 9, 5
	a, err := d.AllocImage(w, h, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(a)
	b, err := d.AllocImage(w, h, devices.ImageRGBAF32)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(b)
	out, err := d.Alloc(a.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(out)
	in := ramp(w * h * 4)
	for i := range in {
		in[i] = in[i]*0.5 - 7
	}
	if err := d.CopyIn(a, floatBytes(in)); err != nil {
		t.Fatal(err)
	}
	g := devices.Geometry{Grid: [3]int{(w + 7) / 8, (h + 7) / 8, 1}, Block: [3]int{8, 8, 1}}
	if err := d.Launch(k, g, []devices.Buffer{a, b, out}, []int64{w, h}); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, a.Size())
	if err := d.CopyOut(got, out); err != nil {
		t.Fatal(err)
	}
	if g := bytesFloats(got); !equalFloats(g, in) {
		t.Fatalf("texels read by the kernel %v, want %v", g, in)
	}
	if err := d.CopyOut(got, b); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(in))
	for i, x := range in {
		want[i] = 2*x + 1
	}
	if g := bytesFloats(got); !equalFloats(g, want) {
		t.Fatalf("texels written by the kernel %v, want %v", g, want)
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
