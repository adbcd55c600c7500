package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/target"
)

// Kernels are scheduled for facts that depend on the architecture alone (ArchFacts),
// not on the probed GPU, so that an executable built for "sm_90" anywhere (a GPU node,
// or `kiln prebuild --cuda-arch sm_90` on a CPU-only node) has the same journal key and
// content on every sm_90 GPU. The facts are what every GPU of the architecture has:
// 1024 threads and 48 KiB of static shared memory per block (the static limit on every
// architecture from sm_50 on); the multiprocessor count, which only steers heuristics
// (when a reduction is worth a block of threads), is that of the architecture's
// data-center part.
var smCount = map[string]int{
	"sm_60": 56, "sm_61": 30, "sm_62": 2, "sm_70": 80, "sm_72": 8, "sm_75": 40,
	"sm_80": 108, "sm_86": 84, "sm_87": 16, "sm_89": 128, "sm_90": 132,
	"sm_100": 148, "sm_103": 148, "sm_110": 20, "sm_120": 84, "sm_121": 48,
}

// defaultSMCount is the multiprocessor count of an architecture the table lacks.
const defaultSMCount = 80

// Scheduling limits shared by every architecture kiln builds for.
const (
	archThreadsPerBlock = 1024
	archSharedPerBlock  = 48 << 10
)

// ParseArch checks a CUDA architecture name ("sm_80", "sm_90a") and returns its compute
// capability (8, 0).
func ParseArch(arch string) (major, minor int, err error) {
	if !archPattern.MatchString(arch) {
		return 0, 0, fmt.Errorf("CUDA architecture %q: want sm_ and the compute capability, e.g. sm_80 or sm_90", arch)
	}
	digits := strings.TrimRight(strings.TrimPrefix(arch, "sm_"), "abcdefghijklmnopqrstuvwxyz")
	n, _ := strconv.Atoi(digits) // the pattern holds two or three digits
	major, minor = n/10, n%10
	if major < 5 {
		return 0, 0, fmt.Errorf("CUDA architecture %q: kiln builds for sm_50 and later", arch)
	}
	return major, minor, nil
}

// ArchFacts are the limits kernels for arch are scheduled for (see smCount); arch must
// pass ParseArch.
func ArchFacts(arch string) target.GPUFacts {
	major, minor, err := ParseArch(arch)
	if err != nil {
		panic("BUG: ArchFacts of an unchecked architecture: " + err.Error())
	}
	base := strings.TrimRight(arch, "abcdefghijklmnopqrstuvwxyz")
	sms, ok := smCount[base]
	if !ok {
		sms = defaultSMCount
	}
	return target.GPUFacts{
		MaxWorkGroup:  archThreadsPerBlock,
		LocalMemBytes: archSharedPerBlock,
		ComputeUnits:  sms,
		// half-precision arithmetic is native from compute capability 5.3
		FP16: major > 5 || major == 5 && minor >= 3,
	}
}

// ArchTarget is the compile target for CUDA architecture arch.
func ArchTarget(arch string) (target.Target, error) {
	if _, _, err := ParseArch(arch); err != nil {
		return target.Target{}, fmt.Errorf("%w: %v", target.ErrInvalid, err)
	}
	return target.GPU(target.CUDA, arch, ArchFacts(arch))
}
