// Package roofline measures a machine's roofline and places kernels under it.
//
// The roofline of a machine on a number of threads is two numbers measured on it: the
// peak floating-point rate (FLOP/s) and the memory bandwidth (bytes/s). A kernel that
// must do F floating-point operations and move B bytes cannot take less than
//
//	bound = max(F / peak, B / bandwidth)
//
// seconds, which is the time form of the classic min(peak, bandwidth × F/B); a kernel
// that took t seconds reaches bound/t of its roofline.
//
// Measurement (machine.go), generated C built by the device's compiler with its flags
// (the kernels' own), run on the device:
//
//   - FMA peak: independent chains of fused multiply-adds on vector registers, enough
//     chains to cover the FMA latency times the FMA ports and few enough to stay in the
//     register file (PeakMeter). Two FLOPs per lane per multiply-add.
//   - Bandwidth: a STREAM triad a[i] = b[i] + s·c[i] over float32 arrays each four
//     times the last-level cache that sysfs reports (32 MiB assumed where it reports
//     none), so no array stays cached between passes, counted as STREAM counts it:
//     12 bytes per element (two reads and one write; the read a write-allocating cache
//     makes of a is not counted). Arrays are written once before the timed passes (a
//     fresh mapping reads as the shared zero page).
//
// The bandwidth is the memory's (DRAM's): a kernel whose tensors stay in the caches
// between launches can move its bytes faster and reach more than 100% of a roofline
// bound by memory.
//
// On several threads each thread runs the fixture on its own arrays and the rate is
// the sum over the wall time; on one thread the fixture is timed by the thread's CPU
// time (Clock), which a loaded machine's preemptions do not inflate. A measurement is
// the median of repetitions.
//
// Counting (work.go): the work a fused group of graph nodes must do at least, from the
// shapes of the model's tensors (their logical shapes: the padding of a blocked layout
// is not counted). FLOPs are two per multiply-add of the anchor's product (Conv,
// ConvTranspose, MatMul, Gemm); the epilogue's elementwise operations and the
// arithmetic of other ops are not counted, so those kernels are measured against the
// bandwidth alone. Bytes are each tensor the group reads from outside it read once
// (constants included) and each output of its last node written once.
package roofline
