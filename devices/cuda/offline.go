package cuda

import (
	"fmt"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// ptxName is the translation unit's name in NVRTC's messages.
const ptxName = "kiln.cu"

// BuildPTX compiles a translation unit of kernels to PTX for the device's architecture
// (what an executable for this GPU carries: the driver compiles it when it loads it). No
// NVRTC is devices.ErrUnavailable; a source that does not compile is devices.ErrBuild
// with NVRTC's log.
func (d *Device) BuildPTX(source string) ([]byte, error) {
	if d.nvrtc == nil {
		_, err := FindNVRTC()
		return nil, fmt.Errorf("CUDA device %d (%s): cannot compile kernels: %w", d.ordinal, d.info.Name, err)
	}
	return d.nvrtc.Compile(source, ptxName, CompileOptions{Arch: d.arch})
}

// Offline is a CUDA architecture without a GPU: it compiles kernels to PTX for the
// architecture with NVRTC and runs nothing (every memory, load and launch call is
// devices.ErrUnavailable). `kiln prebuild --target cuda --cuda-arch sm_90` compiles for
// it on a node without a GPU; its Info and Target equal those of every GPU of the
// architecture, so the executables it puts in the journal are the ones such a GPU looks
// up.
type Offline struct {
	arch  string
	nvrtc *NVRTC
	info  devices.Info
}

// NewOffline returns the compile-only device of arch ("sm_80"). An invalid architecture
// is an error; no NVRTC is devices.ErrUnavailable.
func NewOffline(arch string) (*Offline, error) {
	if _, _, err := ParseArch(arch); err != nil {
		return nil, err
	}
	nv, err := FindNVRTC()
	if err != nil {
		return nil, fmt.Errorf("compiling for CUDA %s: %w", arch, err)
	}
	return &Offline{arch: arch, nvrtc: nv, info: devices.Info{Kind: "cuda", Name: arch + " (compile only, no GPU)",
		Fingerprint: "cuda/" + arch, Toolchain: nv.Version()}}, nil
}

// Arch is the architecture the device compiles for.
func (o *Offline) Arch() string { return o.arch }

// Target is the compile target of the architecture (ArchTarget).
func (o *Offline) Target() (target.Target, error) { return ArchTarget(o.arch) }

// BuildPTX compiles a translation unit of kernels to PTX for the architecture.
func (o *Offline) BuildPTX(source string) ([]byte, error) {
	return o.nvrtc.Compile(source, ptxName, CompileOptions{Arch: o.arch})
}

// Info implements devices.Device.
func (o *Offline) Info() devices.Info { return o.info }

func (o *Offline) none(what string) error {
	return devices.Unavailablef("CUDA %s is compile-only (no GPU): cannot %s", o.arch, what)
}

// Alloc implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) Alloc(int64) (devices.Buffer, error) { return nil, o.none("allocate memory") }

// Free implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) Free(devices.Buffer) error { return o.none("free memory") }

// CopyIn implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) CopyIn(devices.Buffer, []byte) error { return o.none("copy") }

// CopyOut implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) CopyOut([]byte, devices.Buffer) error { return o.none("copy") }

// Copy implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) Copy(_, _ devices.Buffer) error { return o.none("copy") }

// Load implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) Load([]byte) (devices.Module, error) { return nil, o.none("load kernels") }

// Launch implements devices.Device: always devices.ErrUnavailable.
func (o *Offline) Launch(devices.Kernel, devices.Geometry, []devices.Buffer, []int64) error {
	return o.none("launch kernels")
}

// Sync implements devices.Device: nothing was launched.
func (o *Offline) Sync() error { return nil }

// Close implements devices.Device.
func (o *Offline) Close() error { return nil }

var _ devices.Device = (*Offline)(nil)
