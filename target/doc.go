// Package target describes what kiln compiles for, as plain data: the kind of device, the
// instruction-set features, core count, and a GPU's limits (GPUFacts: work-group size,
// local memory, compute units, image2d limits, fp16). It is a value type with a stable
// text form so that it can be part of cache keys; nothing here probes devices except
// Host, which reads the CPU features of this machine through golang.org/x/sys/cpu. A
// GPU device's probe builds its target with GPU from the limits it read.
//
// KILN_CPU_ISA (ISAEnv) caps what Host reports on x86 at a Level (avx512, avx2, sse4,
// generic): the features above it are dropped (isa.go), so Fingerprint, strategies and
// micro-kernels are those of a CPU of that level, and the journal keys built from the
// fingerprint keep code built under one cap apart from code built under another. The
// cap only removes features the CPU has; it never adds one. HostChecked reports an
// unknown value (ErrUnknownLevel); Host ignores it, and the CPU device, which builds
// with compiler flags matching the cap, refuses to open with it.
//
// Invariants: Features are sorted and unique; Fingerprint is deterministic for equal
// targets; a CPU's GPUFacts are zero and zero facts add nothing to String or
// Fingerprint, so a CPU's text forms (and the journal keys built from them) do not
// depend on the GPU fields; every GPU fact is in both text forms.
package target
