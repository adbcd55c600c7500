// Package kernels is the target-neutral operator inventory of the compiler: for each
// graph op, its compute definition in te; the registry of those definitions; the strategy
// types a target fills in (Strategy, Strategies indexed by graph.Op, Impl, Param,
// Epilogue); and the helpers every target's strategies can use (Generic and GenericFused
// lower a definition under a schedule rule, ApplyEpilogues fuses an elementwise chain,
// Syms and SymExpr give symbolic extents). A target's strategies, and the definitions in
// layouts only its schedules use, live below it (kernels/cpu). A fused group's anchor op
// picks the schedule; the rest is inlined.
//
// The Registry (Default) maps every op with a definition to its ComputeFunc:
// elementwise and broadcasting ops (kiln.AttentionMask among them: (1 − Cast(m))·value
// in the output dtype), injective data movement (transpose, gather, slice, concat,
// split, expand, pad, tile, reshape family, depth/space), reductions, softmax family,
// normalizations, pooling in 1-3 spatial dims, matmul (numpy semantics), gemm,
// convolution and transposed convolution. Recurrent layers (LSTM, GRU, RNN) have no te
// definition: a recurrence cannot be written as index expressions, so a target builds
// their loop nest directly (kernels/cpu). Strategies (per target, see kernels/cpu) turn
// a node into an Impl: a scheduled loopir function plus where each parameter comes from,
// with an optional host Prepack of a constant input (weights in a blocked layout). Forms
// for a strategy to schedule: MatMulReduction (a plain sum over k, for a micro-kernel to
// tensorize) and ConvWinograd (Winograd F(2×2, 3×3): input transform, 16 products,
// output transform; weights transformed by TransformWinogradWeights at compile time).
//
// Range and ConstantOfShape are generators sized by the node's output type: with
// constant inputs fold-constants has replaced them, so what reaches a kernel is sized
// over the symbols (a kiln.ShapeExpr), which the compiler binds at run time. Every op
// not listed returns ErrNoKernel with the reason; data-dependent output shapes (NonZero,
// Unique, Compress) have no kernel, and the compiled engine reports them.
//
// Symbolic extents: placeholders may have extents over Vars named like the
// graph's symbols (te.Dim), which become the kernel's runtime dims, passed by name. Syms
// and SymExpr turn a graph.Dim into such an expression, reusing the inputs' Vars, so a
// definition can take a shape from the node's output type (a Reshape or Expand whose
// shape is a kiln.ShapeExpr). The reshape family (Reshape, Flatten, Squeeze with axes,
// Unsqueeze, Expand, Tile) is symbolic: axes are matched in groups of provably equal
// products (no division where axes only move or merge) and otherwise linearized and
// split with div/mod by the runtime extents (taken as at least 1, so nothing divides by
// zero); a symbolic extent broadcast by Expand is read at min(i, extent-1), right
// whether it is 1 or not. Slice takes starts and ends that are constants or known over
// the symbols and clamps the window at run time where an extent or a bound is symbolic;
// an operand known only at run time (value-dependent shapes: the compiler binds the
// output type's fresh extents on the host first) is taken from the output type where
// it only sizes the result (Tile's repeats, Split's sizes, whose offsets are the sums of
// the earlier parts' extents, OneHot's depth, Range's length, Expand's target) and read
// by the kernel where it also places the window (Slice's starts, axes and steps, Pad's
// pads and axes, injective_runtime.go, clamped as the host clamped them). A reduction
// over run-time axes keeping dims reduces each axis over its extent minus the output's
// plus one positions from the output index (all of a reduced axis, one of a kept one);
// the compiler lowers the form dropping them as that and a view;
// Gather, Concat, Split, Transpose, Where, Cast and the elementwise family, softmax,
// layer norm, matmul and gemm take symbolic extents as they are; Conv takes symbolic
// spatial extents with explicit or VALID padding (ResolveConvSym: the output extent is
// an expression, and every input read is guarded at both ends and clamped). Conv,
// ConvTranspose and pooling windows take their geometry from graph.Window (ResolveConv,
// ResolveConvTranspose, NewPoolWindow), the resolution shape inference uses. Every
// runtime value, 0 and 1 included, reads in bounds (a read whose value a Select discards
// may touch element 0 of an input that is empty at run time: devices give every buffer
// storage); the static path is unchanged.
//
// Indices read from data (Gather, GatherElements; a constant index along a symbolic
// axis too) go through te.CheckedIndex: ONNX's range [-n, n), negative values counting
// from the end; one outside it fails the kernel with its value (the VM reports an input
// error naming the node) and reads a clamped index meanwhile.
//
// Invariants: definitions are pure functions of their input tensors and attributes;
// symbolic extents stay symbolic; padding reads go through guarded Selects, and indices
// from data through te.CheckedIndex, never out of bounds. The package is target-neutral:
// it imports no ISA-specific package (intrin) and queries no target feature; a strategy
// that needs the vector width passes it in as a parameter (internal/archtest enforces
// this for kernels and every package below it but kernels/cpu).
package kernels
