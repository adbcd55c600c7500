package cuda

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/internal/dynlib"
)

// nvrtcSonames are the NVRTC libraries kiln knows, newest first: each major release has
// its own soname (CUDA 11's is 11.2 for every 11.x from 11.2 on).
var nvrtcSonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}

// nvrtcDirs are the folders searched after the loader's path: the CUDA toolkit's, then
// the NVIDIA wheels' inside Python's package folders.
func nvrtcDirs() []string {
	dirs := []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}
	var sites []string
	for _, pattern := range []string{"/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"} {
		m, _ := filepath.Glob(pattern)
		sites = append(sites, m...)
	}
	for _, env := range []string{"VIRTUAL_ENV", "HOME"} {
		if root := os.Getenv(env); root != "" {
			sub := "lib/python3*/site-packages"
			if env == "HOME" {
				sub = ".local/" + sub
			}
			m, _ := filepath.Glob(filepath.Join(root, sub))
			sites = append(sites, m...)
		}
	}
	for _, s := range sites {
		dirs = append(dirs, filepath.Join(s, "nvidia/cuda_nvrtc/lib"), filepath.Join(s, "nvidia/cu13/lib"))
	}
	return dirs
}

// NVRTC is NVIDIA's run-time compiler of CUDA C++ to PTX and cubin, bound from its
// shared library.
type NVRTC struct {
	path         string
	major, minor int32

	version, getErrorString, createProgram, compileProgram, destroyProgram uintptr
	getPTXSize, getPTX, getLogSize, getLog                                 uintptr
	getCUBINSize, getCUBIN                                                 uintptr // 0 before NVRTC 11.1
}

var (
	nvrtcOnce sync.Once
	theNVRTC  *NVRTC
	nvrtcErr  error
)

// FindNVRTC binds NVRTC once per process: $KILN_NVRTC, then the sonames on the loader's
// path, then the toolkit's and Python wheels' folders. None found is
// devices.ErrUnavailable naming every path tried.
func FindNVRTC() (*NVRTC, error) {
	nvrtcOnce.Do(func() { theNVRTC, nvrtcErr = bindNVRTC() })
	return theNVRTC, nvrtcErr
}

func bindNVRTC() (*NVRTC, error) {
	candidates := dynlib.EnvFirst("KILN_NVRTC", append(append([]string{}, nvrtcSonames...),
		dynlib.InDirs(nvrtcDirs(), append(append([]string{}, nvrtcSonames...), "libnvrtc.so")...)...))
	h, path, err := dynlib.Open(candidates)
	if err != nil {
		return nil, devices.Unavailablef("no NVRTC library: %v", err)
	}
	n := &NVRTC{path: path}
	err = dynlib.Symbols(h, map[string]*uintptr{
		"nvrtcVersion": &n.version, "nvrtcGetErrorString": &n.getErrorString,
		"nvrtcCreateProgram": &n.createProgram, "nvrtcCompileProgram": &n.compileProgram,
		"nvrtcDestroyProgram": &n.destroyProgram,
		"nvrtcGetPTXSize":     &n.getPTXSize, "nvrtcGetPTX": &n.getPTX,
		"nvrtcGetProgramLogSize": &n.getLogSize, "nvrtcGetProgramLog": &n.getLog,
	})
	if err != nil {
		return nil, devices.Unavailablef("%s: %v", path, err)
	}
	if s, err := purego.Dlsym(h, "nvrtcGetCUBINSize"); err == nil {
		if t, err := purego.Dlsym(h, "nvrtcGetCUBIN"); err == nil {
			n.getCUBINSize, n.getCUBIN = s, t
		}
	}
	if err := n.check("nvrtcVersion", n.call(n.version, uintptr(unsafe.Pointer(&n.major)), uintptr(unsafe.Pointer(&n.minor)))); err != nil {
		return nil, devices.Unavailablef("%s: %v", path, err)
	}
	return n, nil
}

// Version names the compiler for cache keys: "nvrtc 12.4".
func (n *NVRTC) Version() string { return fmt.Sprintf("nvrtc %d.%d", n.major, n.minor) }

// Path is the library that was loaded.
func (n *NVRTC) Path() string { return n.path }

// nvrtcCompilation is NVRTC_ERROR_COMPILATION: the source has errors (see the log).
const nvrtcCompilation = 6

// call makes one foreign call returning an nvrtcResult; see driver.call for why it
// treats its arguments as escaping pointers.
//
//go:uintptrescapes
func (n *NVRTC) call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

func (n *NVRTC) check(what string, r int32) error {
	if r == 0 {
		return nil
	}
	s, _, _ := purego.SyscallN(n.getErrorString, uintptr(r))
	return fmt.Errorf("%s: %s (nvrtcResult %d)", what, gostring(ptr(s)), r)
}

// CompileOptions say what to build.
type CompileOptions struct {
	// Arch is the GPU architecture, as Device.Arch names it ("sm_90", "sm_90a").
	Arch string
	// Cubin asks for machine code for Arch instead of PTX for its virtual architecture
	// (compute_XX), which the driver compiles when it loads it.
	Cubin bool
	// Options are further NVRTC options, e.g. "--std=c++14", "-lineinfo".
	Options []string
}

var archPattern = regexp.MustCompile(`^sm_[0-9]{2,3}[a-z]?$`)

// Compile builds source (CUDA C++; name is its file name in messages) to PTX text or a
// cubin, compiled with -default-device so functions are device code unless marked. A
// compile error is devices.ErrBuild carrying NVRTC's log.
func (n *NVRTC) Compile(source, name string, o CompileOptions) ([]byte, error) {
	if !archPattern.MatchString(o.Arch) {
		return nil, fmt.Errorf("%w: %s: architecture %q is not of the form sm_90", devices.ErrBuild, name, o.Arch)
	}
	if o.Cubin && n.getCUBIN == 0 {
		return nil, devices.Unavailablef("%s (%s) cannot build cubins", n.Version(), n.path)
	}
	arch := "compute_" + strings.TrimPrefix(o.Arch, "sm_")
	if o.Cubin {
		arch = o.Arch
	}
	src, cname := dynlib.CString(source), dynlib.CString(name)
	var prog uintptr
	if err := n.check("nvrtcCreateProgram", n.call(n.createProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0)); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", devices.ErrBuild, name, err)
	}
	defer n.call(n.destroyProgram, uintptr(unsafe.Pointer(&prog)))
	opts := append([]string{"--gpu-architecture=" + arch, "-default-device"}, o.Options...)
	copts := make([][]byte, len(opts))
	ptrs := make([]unsafe.Pointer, len(opts))
	for i, s := range opts {
		copts[i] = dynlib.CString(s)
		ptrs[i] = unsafe.Pointer(&copts[i][0])
	}
	r := n.call(n.compileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	runtime.KeepAlive(copts)
	if r != 0 {
		log := n.output(prog, n.getLogSize, n.getLog)
		if r == nvrtcCompilation {
			return nil, fmt.Errorf("%w: %s for %s: %s", devices.ErrBuild, name, o.Arch, strings.TrimSpace(string(log)))
		}
		return nil, fmt.Errorf("%w: %s for %s: %v: %s", devices.ErrBuild, name, o.Arch, n.check("nvrtcCompileProgram", r), strings.TrimSpace(string(log)))
	}
	var out []byte
	if o.Cubin {
		out = n.output(prog, n.getCUBINSize, n.getCUBIN)
	} else {
		out = n.output(prog, n.getPTXSize, n.getPTX)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s for %s: NVRTC produced no output", devices.ErrBuild, name, o.Arch)
	}
	return out, nil
}

// output reads one of a program's results through its size and copy functions; text
// results lose their terminating NUL.
func (n *NVRTC) output(prog, sizeFn, getFn uintptr) []byte {
	var size uint64
	if n.call(sizeFn, prog, uintptr(unsafe.Pointer(&size))) != 0 || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	if n.call(getFn, prog, uintptr(unsafe.Pointer(&buf[0]))) != 0 {
		return nil
	}
	if getFn != n.getCUBIN {
		buf = bytes.TrimRight(buf, "\x00")
	}
	return buf
}
