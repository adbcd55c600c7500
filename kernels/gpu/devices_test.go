package gpu_test

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// loader prints a lowered case in a device's language, builds it, loads it and returns
// the module and its kernel.
type loader func(t *testing.T, l *lowered, name string) (devices.Module, devices.Kernel)

func cudaLoader(nv *cuda.NVRTC, d *cuda.Device) loader {
	return func(t *testing.T, l *lowered, name string) (devices.Module, devices.Kernel) {
		t.Helper()
		src := l.cudaSource(t)
		ptx, err := nv.Compile(src.Code, name+".cu", cuda.CompileOptions{Arch: d.Arch()})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src.Code)
		}
		return loadKernel(t, d, ptx, src.Kernels[0])
	}
}

func openclLoader(d *opencl.Device) loader {
	return func(t *testing.T, l *lowered, name string) (devices.Module, devices.Kernel) {
		t.Helper()
		src, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, l.f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bin, err := d.Build(src.Code, "")
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src.Code)
		}
		return loadKernel(t, d, bin, src.Kernels[0])
	}
}

func loadKernel(t *testing.T, d devices.Device, bin []byte, name string) (devices.Module, devices.Kernel) {
	t.Helper()
	mod, err := d.Load(bin)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	k, err := mod.Kernel(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return mod, k
}

// openclOrSkip opens the default OpenCL device (PoCL here), or skips the test when
// there is none (fails it under KILN_REQUIRE_DATA=1).
func openclOrSkip(t *testing.T) *opencl.Device { return gputest.OpenCL(t) }

// checkCases launches every case of cs on d at each binding of its symbols with the derived
// geometry and compares with the reference evaluator.
func checkCases(t *testing.T, cs []gcase, d devices.Device, tg target.Target, load loader) {
	for _, c := range cs {
		l := lower(t, c, tg)
		mod, k := load(t, l, c.name)
		for i, env := range c.binds {
			l.run(t, d, k, c.name, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIndexFailure launches a gather whose indices hold 9 along an axis of 6: the
// kernel claims the status block, and the launch fails with the index and the extent.
func checkIndexFailure(t *testing.T, d devices.Device, tg target.Target, load loader) {
	c := gcase{name: "gather_bad", op: graph.OpGather, attrs: &graph.GatherAttrs{Axis: 1},
		args: []graph.Type{ty(t, tensor.Float32, "5", "6"), ty(t, tensor.Int64, "3")}}
	l := lower(t, c, tg)
	mod, k := load(t, l, c.name)
	defer mod.Close()
	in := l.inputs(t, nil, 1)
	for v, name := range l.params {
		if v.Type.DType == tensor.Int64 {
			in[name] = tensor.MustFromSlice(tensor.Shape{3}, []int64{1, 9, -2})
		}
	}
	_, _, err := l.exec(t, d, k, nil, in, tensor.Shape{5, 3})
	var ke *devices.KernelError
	if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange || ke.Detail != [2]int64{9, 6} {
		t.Fatalf("err = %v (%+v), want a KernelError for index 9 of 6", err, ke)
	}
}

func cudaTarget(t *testing.T, d *cuda.Device) target.Target {
	t.Helper()
	tg, err := d.Target()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func openclTarget(t *testing.T, d *opencl.Device) target.Target {
	t.Helper()
	tg, err := d.Target()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestInjectiveKernelsMatchRefOnCUDA runs every case on a CUDA GPU (skipped without one).
func TestInjectiveKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkCases(t, cases(t), d, cudaTarget(t, d), cudaLoader(nv, d))
}

// TestInjectiveKernelsMatchRefOnOpenCL runs every case, printed in OpenCL C and built
// by the driver, on the OpenCL device.
func TestInjectiveKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkCases(t, cases(t), d, openclTarget(t, d), openclLoader(d))
}

func TestIndexOutOfRangeFailsThroughTheStatusBlockOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkIndexFailure(t, d, cudaTarget(t, d), cudaLoader(nv, d))
}

func TestIndexOutOfRangeFailsThroughTheStatusBlockOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkIndexFailure(t, d, openclTarget(t, d), openclLoader(d))
}
