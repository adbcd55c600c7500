package vm

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
)

// sampleLaunch is sampleConsts with a GPU kernel: a grid of ceil(n/128) blocks of 128.
func sampleLaunch() *Executable {
	x := sampleConsts()
	x.Kernels[0].Launch = &KernelLaunch{
		Grid:  [3]Extent{{ExtDim, 0, ExtConst, 127, ExtAdd, ExtConst, 128, ExtDiv}, ConstExtent(1), ConstExtent(1)},
		Block: [3]Extent{ConstExtent(128), ConstExtent(1), ConstExtent(1)},
	}
	return x
}

func TestKernelLaunchTravelsInTheExecutable(t *testing.T) {
	b, err := sampleLaunch().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var x Executable
	if err := x.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Kernels[0].Launch, sampleLaunch().Kernels[0].Launch) {
		t.Fatalf("launch decoded as %+v", x.Kernels[0].Launch)
	}
	var cpu Executable
	cb, _ := sampleConsts().MarshalBinary()
	if err := cpu.UnmarshalBinary(cb); err != nil || cpu.Kernels[0].Launch != nil {
		t.Fatalf("a CPU kernel decoded with launch %+v (%v)", cpu.Kernels[0].Launch, err)
	}
}

// TestBadLaunchGeometryIsAFormatError: a geometry reading a dim the kernel lacks, an
// unbalanced extent, or an unknown launch flag fails decoding with ErrFormat.
func TestBadLaunchGeometryIsAFormatError(t *testing.T) {
	for name, edit := range map[string]func(l *KernelLaunch){
		"dim out of range": func(l *KernelLaunch) { l.Grid[1] = Extent{ExtDim, 1} },
		"empty block":      func(l *KernelLaunch) { l.Block[2] = nil },
		"two values":       func(l *KernelLaunch) { l.Block[0] = Extent{ExtConst, 1, ExtConst, 2} },
	} {
		x := sampleLaunch()
		edit(x.Kernels[0].Launch)
		if err := x.Verify(); !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: Verify: %v", name, err)
		}
		b, err := x.encode()
		if err != nil {
			t.Fatal(err)
		}
		var y Executable
		if err := y.UnmarshalBinary(b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "launch") {
			t.Fatalf("%s: decoding: %v", name, err)
		}
	}
	// the flag is the first byte where a CPU kernel's encoding and a GPU kernel's differ
	cpu := sampleLaunch()
	cpu.Kernels[0].Launch = nil
	good, _ := cpu.encode()
	gpu, _ := sampleLaunch().encode()
	h, _ := parseHeader(good)
	payload := append([]byte{}, good[HeaderSize:h.metaEnd]...)
	at := 0
	for at < len(payload) && payload[at] == gpu[HeaderSize+at] {
		at++
	}
	if payload[at] != 0 || gpu[HeaderSize+at] != 1 {
		t.Fatalf("the launch flag is not where this test expects it")
	}
	payload[at] = 2
	data := good[h.dataOff:]
	if _, err := Decode(split(payload, data), data, nil); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "launch flag 2") {
		t.Fatalf("launch flag 2: %v", err)
	}
}

// TestAnOlderFormatIsAVersionMiss: a file of format 4 (no launch geometry) is
// ErrVersion, a cache miss.
func TestAnOlderFormatIsAVersionMiss(t *testing.T) {
	b, _ := sampleConsts().MarshalBinary()
	b[8] = 4
	var x Executable
	if err := x.UnmarshalBinary(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("format 4: %v", err)
	}
}

func TestLaunchGeometryIsEvaluatedAtTheDims(t *testing.T) {
	in := &Instr{Op: InvokeKernel, Str: "y of node relu_3"}
	k := sampleLaunch().Kernels[0]
	g, skip, err := geometry(in, k, []int64{1000})
	if err != nil || skip || g != (devices.Geometry{Grid: [3]int{8, 1, 1}, Block: [3]int{128, 1, 1}}) {
		t.Fatalf("n=1000: %+v skip=%v %v", g, skip, err)
	}
	if _, skip, err := geometry(in, k, []int64{0}); err != nil || !skip {
		t.Fatalf("n=0: skip=%v %v; want an empty grid, skipped", skip, err)
	}
	// a grid that overflows is the request's fault
	k.Launch = &KernelLaunch{Grid: [3]Extent{{ExtDim, 0, ExtDim, 0, ExtMul}, ConstExtent(1), ConstExtent(1)}, Block: sampleLaunch().Kernels[0].Launch.Block}
	if _, _, err := geometry(in, k, []int64{1 << 40}); !errors.Is(err, ErrInput) || !errors.Is(err, tensor.ErrTooLarge) || !strings.Contains(err.Error(), "relu_3") || !strings.Contains(err.Error(), "add") {
		t.Fatalf("overflowing grid: %v", err)
	}
	if _, _, err := geometry(in, k, []int64{1 << 20}); err == nil || !strings.Contains(err.Error(), "kernel add grid") {
		t.Fatalf("a grid past 2^31-1 blocks: %v", err)
	}
	k.Launch.Grid[0] = Extent{ExtConst, 0, ExtDim, 0, ExtSub}
	if _, _, err := geometry(in, k, []int64{3}); err == nil || errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "kernel add grid extent 0 is -3") {
		t.Fatalf("negative grid: %v", err)
	}
	k.Launch.Grid[0] = ConstExtent(1)
	k.Launch.Block[1] = ConstExtent(0)
	if _, _, err := geometry(in, k, []int64{3}); err == nil || !strings.Contains(err.Error(), "kernel add block extent 1 is 0") {
		t.Fatalf("empty block: %v", err)
	}
}

// aligned is a fake device whose kernels need views at multiples of 256 bytes.
type aligned struct{ slicer }

func (aligned) BaseAlign() int64 { return 256 }

// TestPoolSplitsAtTheDeviceAlignment: blocks split from a free buffer start at
// multiples of the device's base alignment, not of PlanAlign.
func TestPoolSplitsAtTheDeviceAlignment(t *testing.T) {
	d := newFakeDev()
	p := newPool([]devices.Device{aligned{slicer{d}}})
	if DeviceAlign(aligned{}) != 256 || DeviceAlign(d) != PlanAlign {
		t.Fatalf("DeviceAlign: %d and %d", DeviceAlign(aligned{}), DeviceAlign(d))
	}
	p.put(mustGet(t, p, 1<<20))
	var got []*Storage
	for _, n := range []int64{100, 70000, 64, 129, 65600} {
		s := mustGet(t, p, n)
		viewOK(t, s)
		if s.base%256 != 0 {
			t.Fatalf("a %d-byte storage at offset %d", n, s.base)
		}
		got = append(got, s)
	}
	if p.st.Splits == 0 {
		t.Fatal("nothing was split")
	}
	checked(t, p, d)
	for _, s := range got {
		p.put(s)
	}
	checked(t, p, d)
}
