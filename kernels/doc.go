// Package kernels is the operator inventory of the compiler: for each graph op, its
// compute definition in te (and, later, its schedule strategies per target, indexed by
// graph.Op). A fused group's anchor op will pick the schedule; the rest is inlined.
//
// Today it holds the compute definitions the tensor compiler is tested with: matmul
// (plain, batched/transposed, and with packed operands for micro-kernels), 2-D
// convolution (NCHW with strides, padding, dilation, groups; NCHWc blocked for
// micro-kernels), max/average pooling, softmax, layer normalization and reductions.
// CPU schedules live in kernels/cpu. Each is checked against kernels/ref through the
// whole pipeline (te → schedule → loopir → C → CPU).
//
// Invariants: definitions are pure functions of their input tensors and attributes;
// symbolic extents stay symbolic; padding reads go through guarded Selects, never out of
// bounds.
package kernels
