// Package kernels is the operator inventory of the compiler: for each graph op, its
// compute definition in te (and, later, its schedule strategies per target, indexed by
// graph.Op). A fused group's anchor op will pick the schedule; the rest is inlined.
//
// Today it holds the compute definitions the tensor compiler is tested with: matmul,
// 2-D convolution (strides, padding, dilation, groups), max/average pooling, softmax,
// layer normalization and reductions. Each is checked against kernels/ref through the
// whole pipeline (te → schedule → loopir → C → CPU).
//
// Invariants: definitions are pure functions of their input tensors and attributes;
// symbolic extents stay symbolic; padding reads go through guarded Selects, never out of
// bounds.
package kernels
