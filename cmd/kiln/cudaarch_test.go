package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/target"
)

// TestCUDAArchAloneMeansTheCUDATargetAndNeverTheCPU: --cuda-arch without --target
// compiles for CUDA; with --target cpu it is a usage error, never a CPU compile that
// ignores it; prebuild's list is split and checked.
func TestCUDAArchAloneMeansTheCUDATargetAndNeverTheCPU(t *testing.T) {
	kind, _, err := targetFlags{cudaArch: "sm_80"}.parse()
	if err != nil || kind != target.CUDA {
		t.Fatalf("--cuda-arch alone: kind %v, %v; want cuda", kind, err)
	}
	_, err = targetFlags{target: "cpu", cudaArch: "sm_80", textures: "on", precision: "fp32"}.open(1, false)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "only with --target cuda") {
		t.Fatalf("--target cpu --cuda-arch sm_80: %v, want a usage error", err)
	}
	passes, err := targetFlags{cudaArch: "sm_80, sm_90,sm_80"}.cudaPasses()
	if err != nil || len(passes) != 2 || passes[0].cudaArch != "sm_80" || passes[1].cudaArch != "sm_90" || passes[1].target != "cuda" {
		t.Fatalf("prebuild passes %+v, %v; want sm_80 and sm_90 for cuda", passes, err)
	}
	if _, err := (targetFlags{cudaArch: "sm_80,gfx90a"}).cudaPasses(); !errors.As(err, &ue) {
		t.Fatalf("an invalid architecture in the list: %v, want a usage error", err)
	}
}
