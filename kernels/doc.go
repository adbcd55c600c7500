// Package kernels is the operator inventory of the compiler: for each graph op, its
// compute definition in te (and, later, its schedule strategies per target, indexed by
// graph.Op). A fused group's anchor op will pick the schedule; the rest is inlined.
//
// The Registry (Default) maps every op with a definition to its ComputeFunc:
// elementwise and broadcasting ops, injective data movement (transpose, gather, slice,
// concat, split, expand, pad, tile, reshape family, depth/space), reductions, softmax
// family, normalizations, pooling in 1-3 spatial dims, matmul (numpy semantics), gemm,
// convolution and transposed convolution. Recurrent layers (LSTM, GRU, RNN) have no te
// definition: a recurrence cannot be written as index expressions, so RNN builds their
// loop nest directly (input projection for all steps on the GEMM micro-kernels, then a
// serial time loop). Strategies (per target, see kernels/cpu) turn a node into an Impl:
// a scheduled loopir function plus where each parameter comes from, with an optional
// host Prepack of a constant input (weights in a blocked layout). Blocked forms for the
// tensorized CPU strategies: ConvNCHWBlocked (NCHW in and out, NCHWc inside one kernel)
// and MatMulPrepacked (B in column panels packed at compile time).
//
// Every op not listed returns ErrNoKernel with the reason; data-dependent output shapes
// (NonZero, Unique, Compress, Range or ConstantOfShape on run-time values) have no
// kernel until dynamic shapes exist (#6), and the compiled engine reports them.
//
// Invariants: definitions are pure functions of their input tensors and attributes;
// symbolic extents stay symbolic; padding reads go through guarded Selects, never out of
// bounds.
package kernels
