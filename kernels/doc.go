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
// in the output dtype), injective data movement (transpose, gather, gather-ND, slice,
// concat, split, expand, pad, tile, reshape family, depth/space), reductions, softmax
// family, normalizations, pooling in 1-3 spatial dims, matmul (numpy semantics), gemm,
// convolution and transposed convolution; the quantization family (quant.go:
// QuantizeLinear and DequantizeLinear per tensor or per axis to and from 8-, 16- and
// 32-bit integers, rounding half to even and saturating; DynamicQuantizeLinear as two
// whole-tensor reductions and three outputs; MatMulInteger and ConvInteger as MatMulND
// and Conv over int32 operands shifted by their zero points, which the schedule
// inlines, the convolution's zero padding a stage "x_padded" of its own, and a 2-D
// convolution of stride 1 written over the flattened padded image (quant_conv.go: a
// long contiguous innermost loop however small the image); QLinearMatMul and
// QLinearConv as those products requantized in float64; blocked quantization, int4 and
// float8 are not in the op table); the losses (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss: class indices read from data, checked against [0, C) unless
// equal to ignore_index); Dropout (the identity unless training_mode is on with a
// positive ratio, both possibly run-time inputs; then a documented seeded draw per
// element, see dropout.go); LRN (a guarded window over the channels); Einsum (the
// equation parsed at compile time into one reduction: diagonals, traces, "..."
// broadcasting, implicit outputs); MaxUnpool (a gather over the pooling windows that
// cover each output; an index outside its window fails the kernel); the optimizers of
// the training domain (training.go: Adagrad, Adam, Momentum, elementwise in float64 over
// the scalars R and T, one compute per output). Recurrent layers
// (LSTM, GRU, RNN) have no te definition: a recurrence cannot be written as index
// expressions, so a target builds their loop nest directly (kernels/cpu); so do the
// scatters (ScatterElements, ScatterND: updates applied in order, last one winning,
// which as an expression per output element would fold every update into every
// element), TopK (a selection) and Det (pivots chosen from the data). Strategies (per
// target, see kernels/cpu) turn
// a node into an Impl: a scheduled loopir function plus where each parameter comes from,
// with an optional host Prepack of a constant input (weights in a blocked layout). Forms
// for a strategy to schedule: MatMulReduction (a plain sum over k, for a micro-kernel to
// tensorize) and ConvWinograd (Winograd F(2×2, 3×3): input transform, 16 products,
// output transform; weights transformed by TransformWinogradWeights at compile time,
// optionally in column panels, PackWinogradPanels).
//
// Channel-blocked storage (graph.Type.Block, [N, C/b, H, W, b], layout.go): placeholders
// take that shape (PhysicalShape); LayoutTransform converts; pooling pools it in place;
// the broadcasting elementwise ops (BroadcastsOnBlocked) with a blocked output read each
// other operand through BlockedView (the blocked index mapped back to its storage);
// Resize of H and W runs the plain definition over the 5-D storage.
//
// Resize (nearest with every nearest_mode, linear and cubic over any number of axes,
// every coordinate transformation, tf_crop_and_resize with its extrapolation value,
// antialiased linear and cubic downscaling, axes, keep_aspect_ratio_policy) takes
// constant scales or sizes (the extents from graph.ResizeOutput, as inference and the
// reference evaluator take them) and is one injective computation: per resized axis
// the source coordinate of the output index, then a gather or a weighted sum over the
// 2 or 4 neighbours per axis, or over the filter stretched by 1/scale with antialias
// (weights divided by their sum), indices clamped. Coordinates are int64 fixed point
// (X = P·o + Q in units of 2^-k), so every target (OpenCL has no double) decides
// nearest indices and crop bounds alike; the plan derives each decision from the
// float64 coordinate ONNX defines and pins the outputs where the fixed-point fit
// decides otherwise (a coordinate an ulp from a tie), refusing an axis that needs too
// many pins. With run-time scales, sizes or roi (resize_runtime.go) the extents are the
// output type's, bound and checked on the host by vm.BuiltinShapeResize, and the kernel
// reads the operands and computes each coordinate and its decisions in float64, once
// per output index of each axis into tables of taps that the weighted sum reads (a
// dialect without double does not print it: codegen's ErrUnsupported), every
// float converted to an index only after a NaN-safe clamp; antialias is refused there
// (its taps depend on the scale).
//
// Signal ops (signal.go) are direct sums in float64, narrowed once: DFT over a constant
// axis (dft_length truncating or zero-padding the signal, a constant or read at run
// time with the output's extents bound by the host; onesided, inverse; the angle from
// k·t mod N), real or complex signals as a trailing axis of 1 or 2; STFT as
// frames × window × DFT (with a constant frame length the factors e^{-2πi·m/N} come
// from an N-entry twiddle stage read at k·t mod N, not a cosine and a sine per term),
// its frame step and length constants or read at run time (the
// output's extents bound by the host; a run-time length sums over the signal's length
// with the terms past it zero); MelWeightMatrix's triangles per element from its scalar
// operands. A dialect without double (OpenCL) does not print them, so they run on the
// CPU there. The sampling ops (sampling.go) compute in the element type, as ONNX's
// reference does: GridSample over 1 to 3 spatial axes in every mode (nearest rounding
// ties to even, away from zero over volumes; Keys cubic with a = -0.75), padding mode
// and align_corners, its coordinates a stage of their own; RoiAlign (avg and max,
// half_pixel and output_half_pixel) with a fixed sampling_ratio, its samples' corners,
// fractions and outside flags per region, bin and sample stages of their own. Refused with
// ErrNoKernel: a run-time DFT axis, GridSample over 4 or more axes, RoiAlign's
// adaptive sampling (sampling_ratio 0, a sample count that depends on each region).
//
// Elementwise arithmetic on half floats (float16, bfloat16) is computed in float32
// and narrowed once; Cast converts them through float32, and floats convert to integers
// with package tensor's rules (NaN and values outside int64 give MinInt64, then wrap),
// never C's undefined conversion. Integer Pow is float64 pow converted that way; Mod
// follows fmod's sign rule (the dividend's, C) or Python's (the divisor's); BitShift
// shifts unsigned integers, a count past the width giving 0. CumSum is a reduction over
// the whole axis with the excluded terms zero; a run-time axis is read through
// te.CheckedIndex and selects, on each axis, the reduction index or the output's.
// ReverseSequence reads its lengths at run time (one outside [0, T] fails the kernel
// through te.CheckedIndex).
//
// Range, ConstantOfShape, EyeLike and the Hann, Hamming and Blackman windows are
// generators sized by the node's output type (a window's size is its output extent;
// it computes in float64, as the reference does): with
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
// Indices read from data (Gather, GatherElements, GatherND; a constant index along a
// symbolic axis too) go through te.CheckedIndex: ONNX's range [-n, n), negative values counting
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
