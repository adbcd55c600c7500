// Package cpu holds the CPU strategies of the operator inventory: for a compute
// definition from package kernels, a schedule (split, reorder, parallel, tensorize...)
// with the knobs a tuner will search, expressed as schedule primitives so that every
// decision lands in the trace.
//
// Today: the packed matmul and the NCHWc 2-D convolution, both tensorized onto the
// outer-product GEMM micro-kernel the target supports (intrin.GemmFor).
//
// Invariants: a strategy only calls schedule primitives, which check their
// preconditions, so a strategy cannot produce wrong code, only fail; strategies are
// differential-tested against kernels/ref with tails (extents not divisible by tiles)
// and symbolic extents.
package cpu
