package main

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
)

// openCPU opens the CPU device with threads for parallel loops (0: every core). With
// needCompiler false a missing C compiler is not an error: prebuilt executables run
// without one.
func openCPU(threads int, needCompiler bool) (*devcpu.Device, error) {
	dev, err := devcpu.Open(devcpu.Options{Threads: threads})
	if err == nil || needCompiler || !errors.Is(err, devices.ErrUnavailable) {
		return dev, err
	}
	return devcpu.Open(devcpu.Options{Threads: threads, NoCompiler: true})
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
