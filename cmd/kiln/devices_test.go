package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/gputest"
)

// TestDevicesListsTheOpenCLDeviceWithItsWorkGroupSize: kiln devices lists the CPU and
// the OpenCL device (PoCL here) as opencl:0 with the device's largest work-group, in
// text and in JSON; the absent CUDA driver is a line saying how to install it, not an
// error.
func TestDevicesListsTheOpenCLDeviceWithItsWorkGroupSize(t *testing.T) {
	dev := gputest.OpenCL(t) // skips without an OpenCL device
	wg := dev.Facts().MaxWorkGroup
	run := func(args ...string) string {
		t.Helper()
		cmd := devicesCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("kiln devices %v: %v", args, err)
		}
		return out.String()
	}
	var r devicesReport
	if err := json.Unmarshal([]byte(run("--json")), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.OpenCL) == 0 || r.OpenCL[0].ID != "opencl:0" || r.OpenCL[0].MaxWorkGroup != wg || r.OpenCL[0].OpenCLC == "" {
		t.Fatalf("opencl devices %+v, want opencl:0 with max work-group %d", r.OpenCL, wg)
	}
	if r.CPU.Threads < 1 || r.CPU.Arch == "" {
		t.Fatalf("cpu %+v", r.CPU)
	}
	if len(r.CUDA) == 0 && (r.CUDAMissing == "" || !strings.Contains(r.CUDAHow, "install")) {
		t.Fatalf("no CUDA device and no line saying why and how to install it: %+v", r)
	}
	text := run()
	if !strings.Contains(text, "opencl:0 ") || !strings.Contains(text, fmt.Sprintf("max work-group size %d", wg)) || !strings.HasPrefix(text, "cpu ") {
		t.Fatalf("text output lacks the CPU or opencl:0 with max work-group size %d:\n%s", wg, text)
	}
}
