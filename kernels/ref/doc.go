// Package ref is the reference evaluator: a plain, readable pure-Go implementation of
// every op the graph supports, and Eval, which runs a whole Module including If, Loop,
// Scan and SequenceMap bodies. It is the oracle that compiled kernels are checked against,
// so correctness beats speed: floats are computed in float64 and rounded to the output
// type, integers stay in int64. Convolution and matrix products use a parallel im2col +
// row-blocked product on float32 so that real models (resnet18) still run in about a
// second.
//
// Independence: ref shares no op semantics with the compiled path. It resolves, for
// instance, convolution and pooling windows (auto_pad, ceil_mode, ConvTranspose's
// output_shape) with its own code rather than graph.Window, and Resize's output extents
// (axes, keep_aspect_ratio_policy) rather than graph.ResizeOutput, which shape inference
// and the kernel definitions share: a mistake there shows up as a disagreement with ref
// instead of being copied into the oracle. The signal and sampling ops (signal.go,
// sampling.go: DFT, STFT, MelWeightMatrix, GridSample in any number of spatial axes,
// RoiAlign in both modes) are direct sums in float64 with their own axis, frame and
// bin arithmetic; only attribute names are decoded by graph (ParseGridSample,
// RoiHalfPixel).
//
// Model: runtime values are *tensor.Tensor, *Sequence or *Optional. Kernels are looked up
// in a table indexed by graph.Op, assembled explicitly from per-family maps.
//
// Invariants and errors: a kernel never panics on bad input; it returns an error wrapping
// ErrBadInput (wrong dtype/shape/index at run time) or ErrUnsupported (an op or mode the
// evaluator does not implement, e.g. random training-mode Dropout). The random ops
// (random.go) draw from vm's generator (vm.NewRandom), the one the compiled engine's host
// ops use, so a seeded op gives the same numbers on both engines; a kiln.Fail (a branch
// that cannot run on the bound shapes) is an ErrBadInput with its message. Eval wraps errors with
// the node, recovers a kernel panic into an error naming the node, checks inputs against
// the parameters' declared types, honors context cancellation between nodes, and bounds
// loops without a trip count (Options.MaxLoopIterations).
package ref
