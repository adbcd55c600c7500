package vm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// imageKernels are OpenCL C kernels in the calling convention over a width×height
// image of RGBA float32 texels holding an NCHW4c tensor in row-major texel order
// (element ((y·w)+x)·4 + lane): from_image reads the image and writes 2v+1 to a buffer,
// to_image reads a buffer and writes v−3 to an image.
const imageKernels = `
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

__kernel void from_image(__read_only image2d_t in, __global char *out_b, long out_o, long w, long h, __global long *status) {
	__global float *out = (__global float *)(out_b + out_o);
	int x = get_global_id(0), y = get_global_id(1);
	if (x >= w || y >= h)
		return;
	float4 v = read_imagef(in, smp, (int2)(x, y));
	vstore4(2.0f * v + 1.0f, (size_t)y * (size_t)w + (size_t)x, out);
}

__kernel void to_image(__global char *in_b, long in_o, __write_only image2d_t out, long w, long h, __global long *status) {
	__global const float *in = (__global const float *)(in_b + in_o);
	int x = get_global_id(0), y = get_global_id(1);
	if (x >= w || y >= h)
		return;
	write_imagef(out, (int2)(x, y), vload4((size_t)y * (size_t)w + (size_t)x, in) - 3.0f);
}
`

// openclImagesOrSkip is the OpenCL rig when its device has images.
func openclImagesOrSkip(t *testing.T) *gpuRig {
	t.Helper()
	r := openclRig(t)
	if w, h := r.dev.(devices.Imager).ImageLimits(); w == 0 || h == 0 {
		t.Skipf("%s has no images; skipping", r.dev.Info().Name)
	}
	return r
}

// imageExe is an executable over the CPU (device 0) and an OpenCL device (1) for an
// f32[1,2,3,5,4] input x (NCHW4c: a 5×6 image): x is copied into an image, from_image
// writes a = 2x+1 to a buffer, to_image writes b = a−3 to an image storage, and it
// returns (a, b copied to the host from the image, b copied within the device to a
// buffer and then to the host). argElems is the elements to_image's output may touch.
func imageExe(t *testing.T, r *gpuRig, argElems int64, out vm.Instr) *vm.Executable {
	t.Helper()
	const w, h = 5, 6
	f32 := tensor.Float32
	shape := []int64{1, 2, 3, 5, 4}
	grid := [3]vm.Extent{vm.ConstExtent(1), vm.ConstExtent(1), vm.ConstExtent(1)}
	block := [3]vm.Extent{vm.ConstExtent(8), vm.ConstExtent(8), vm.ConstExtent(1)}
	arg := func(n int64) vm.KernelArg { return vm.KernelArg{DType: f32, Elements: vm.ConstExtent(n)} }
	kernel := func(name string, in, out int64) vm.KernelInfo {
		return vm.KernelInfo{Name: name, Inputs: 1, Outputs: 1, Dims: []string{"w", "h"}, Args: []vm.KernelArg{arg(in), arg(out)},
			Launch: &vm.KernelLaunch{Grid: grid, Block: block}}
	}
	out.Dst, out.Args, out.Device = 7, []vm.Reg{6}, 1
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 14, Code: []vm.Instr{
			{Op: vm.DeviceCopy, Dst: 1, Args: []vm.Reg{0}, Device: 1, DType: f32, Shape: []int64{w, h}, Str: "x to an image"},
			{Op: vm.AllocStorage, Dst: 2, Imm: 480, Device: 1},
			{Op: vm.AllocTensor, Dst: 3, Args: []vm.Reg{2}, DType: f32, Shape: shape},
			{Op: vm.LoadConstInt, Dst: 4, Imm: w},
			{Op: vm.LoadConstInt, Dst: 5, Imm: h},
			{Op: vm.InvokeKernel, Imm: 0, Args: []vm.Reg{1, 3}, In: 1, Dims: []vm.Reg{4, 5}, Str: "a of node from_image"},
			{Op: vm.AllocStorage, Dst: 6, Imm: w * h * 16, Device: 1, DType: f32, Shape: []int64{w, h}, Str: "the image of b"},
			out,
			{Op: vm.InvokeKernel, Imm: 1, Args: []vm.Reg{3, 7}, In: 1, Dims: []vm.Reg{4, 5}, Str: "b of node to_image"},
			{Op: vm.DeviceCopy, Dst: 8, Args: []vm.Reg{3}, Device: 0},
			{Op: vm.DeviceCopy, Dst: 9, Args: []vm.Reg{7}, Device: 0},
			{Op: vm.DeviceCopy, Dst: 10, Args: []vm.Reg{7}, Device: 1},
			{Op: vm.DeviceCopy, Dst: 11, Args: []vm.Reg{10}, Device: 0},
			{Op: vm.AllocTuple, Dst: 12, Args: []vm.Reg{8, 9, 11}},
			{Op: vm.Ret, Args: []vm.Reg{12}},
		}}},
		Kernels: []vm.KernelInfo{kernel("from_image", 120, 120), kernel("to_image", 120, argElems)},
		Binaries: []vm.Binary{{Device: "opencl", Fingerprint: r.dev.Info().Fingerprint,
			Data: []byte(opencl.SourceMarker + imageKernels)}},
	}
}

func TestImageStoragesCarryTensorsThroughKernelsOnOpenCL(t *testing.T) {
	r := openclImagesOrSkip(t)
	f32 := tensor.Float32
	shape := []int64{1, 2, 3, 5, 4}
	exe := imageExe(t, r, 120, vm.Instr{Op: vm.AllocTensor, DType: f32, Shape: shape})
	v, err := vm.Load(roundTrip(t, exe), []devices.Device{openCPU(t), r.dev}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var allocs uint64
	for i := range 3 {
		x := randomF32(tensor.Shape{1, 2, 3, 5, 4}, uint64(30+i))
		outs, err := v.Run(context.Background(), []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		xs := x.Data.([]float32)
		a, b := make([]float32, len(xs)), make([]float32, len(xs))
		for j, e := range xs {
			a[j] = 2*e + 1
			b[j] = a[j] - 3
		}
		for j, w := range [][]float32{a, b, b} {
			got := outs[j].Data.([]float32)
			if fmt.Sprint(outs[j].Shape) != fmt.Sprint(x.Shape) {
				t.Fatalf("run %d output %d has shape %v, want %v", i, j, outs[j].Shape, x.Shape)
			}
			for e := range w {
				if got[e] != w[e] {
					t.Fatalf("run %d output %d element %d = %v, want %v", i, j, e, got[e], w[e])
				}
			}
		}
		st := v.MemoryStats()
		if i == 0 {
			allocs = st.Allocs
			continue
		}
		if st.Allocs != allocs || st.InUse != 0 {
			t.Errorf("run %d: %+v; want the first run's %d device allocations reused (images included), nothing in use", i, st, allocs)
		}
	}
	// the two images of one size and format are kept and reused, never sliced
	if st := v.MemoryStats(); st.Hits < 2*4 {
		t.Errorf("%+v: want every storage of the later runs served from the pool", st)
	}
	if n := v.TrimMemory(); n < 2*480 {
		t.Errorf("trim returned %d bytes, want at least the two images' %d", n, 2*480)
	}
	if st := v.MemoryStats(); st.Held != 0 || st.Buffers != 0 {
		t.Errorf("after trim %+v, want nothing held", st)
	}
}

// TestImageCapacityBoundsKernelExtentsOnOpenCL: a tensor in an image may hold fewer
// bytes than the image; a kernel may touch the image's width·height·4 elements, and no
// more.
func TestImageCapacityBoundsKernelExtentsOnOpenCL(t *testing.T) {
	r := openclImagesOrSkip(t)
	f32 := tensor.Float32
	small := vm.Instr{Op: vm.AllocTensor, DType: f32, Shape: []int64{100}}
	x := randomF32(tensor.Shape{1, 2, 3, 5, 4}, 40)
	devs := []devices.Device{openCPU(t), r.dev}
	// to_image's output tensor holds 100 elements of the image's 120
	v, err := vm.Load(imageExe(t, r, 120, small), devs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	outs, err := v.Run(context.Background(), []*tensor.Tensor{x})
	if err != nil {
		t.Fatalf("a kernel touching the image's capacity: %v", err)
	}
	if got, want := outs[1].Data.([]float32), x.Data.([]float32); len(got) != 100 || got[99] != 2*want[99]+1-3 {
		t.Errorf("the 100 elements read from the image: %d, last %v, want %v", len(got), got[len(got)-1], 2*want[99]+1-3)
	}
	over, err := vm.Load(imageExe(t, r, 121, small), devs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if _, err := over.Run(context.Background(), []*tensor.Tensor{x}); err == nil || !strings.Contains(err.Error(), "may touch 484 bytes") {
		t.Errorf("a kernel touching more than the image: %v, want a refusal", err)
	}
	// a tensor in an image starts at offset 0
	off := vm.Instr{Op: vm.AllocTensor, DType: f32, Shape: []int64{4}, Imm: 16}
	at, err := vm.Load(imageExe(t, r, 4, off), devs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Close()
	if _, err := at.Run(context.Background(), []*tensor.Tensor{x}); err == nil || !strings.Contains(err.Error(), "start at 0") {
		t.Errorf("a tensor at offset 16 of an image: %v, want a refusal", err)
	}
}

func TestVerifyRefusesMalformedImageStorages(t *testing.T) {
	f32 := tensor.Float32
	for name, in := range map[string]vm.Instr{
		"one side":        {Op: vm.AllocStorage, Imm: 64, DType: f32, Shape: []int64{4}},
		"three sides":     {Op: vm.AllocStorage, Imm: 64, DType: f32, Shape: []int64{2, 2, 1}},
		"empty":           {Op: vm.AllocStorage, Imm: 0, DType: f32, Shape: []int64{0, 4}},
		"negative":        {Op: vm.AllocStorage, Imm: 64, DType: f32, Shape: []int64{-1, -4}},
		"huge":            {Op: vm.AllocStorage, Imm: 16 << 40, DType: f32, Shape: []int64{1 << 40, 1}},
		"int texels":      {Op: vm.AllocStorage, Imm: 64, DType: tensor.Int32, Shape: []int64{2, 2}},
		"wrong size":      {Op: vm.AllocStorage, Imm: 65, DType: f32, Shape: []int64{2, 2}},
		"run-time size":   {Op: vm.AllocStorage, Args: []vm.Reg{0}, Imm: 64, DType: f32, Shape: []int64{2, 2}},
		"copy to one row": {Op: vm.DeviceCopy, Args: []vm.Reg{0}, DType: f32, Shape: []int64{4}},
	} {
		in.Dst = 1
		exe := &vm.Executable{Functions: []vm.Function{{Name: "main", Params: 1, Regs: 2, Code: []vm.Instr{
			in, {Op: vm.Ret, Args: []vm.Reg{0}},
		}}}}
		if err := exe.Verify(); err == nil {
			t.Errorf("%s: %+v verified", name, in)
		}
	}
	good := &vm.Executable{Functions: []vm.Function{{Name: "main", Params: 1, Regs: 2, Code: []vm.Instr{
		{Op: vm.AllocStorage, Dst: 1, Imm: 64, DType: f32, Shape: []int64{2, 2}},
		{Op: vm.Ret, Args: []vm.Reg{0}},
	}}}}
	if err := good.Verify(); err != nil {
		t.Errorf("a 2x2 f32 image: %v", err)
	}
}

func TestImageStorageOnADeviceWithoutImagesFailsTheCall(t *testing.T) {
	f32 := tensor.Float32
	exe := &vm.Executable{Functions: []vm.Function{{Name: "main", Params: 1, Regs: 2, Code: []vm.Instr{
		{Op: vm.AllocStorage, Dst: 1, Imm: 64, DType: f32, Shape: []int64{2, 2}, Str: "the image of t"},
		{Op: vm.Ret, Args: []vm.Reg{0}},
	}}}}
	v, err := vm.Load(exe, []devices.Device{openCPU(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	_, err = v.Run(context.Background(), []*tensor.Tensor{randomF32(tensor.Shape{2}, 1)})
	if err == nil || !strings.Contains(err.Error(), "has no images") || errors.Is(err, vm.ErrInput) {
		t.Errorf("an image on the CPU: %v, want an error saying it has no images", err)
	}
}
