// Package graph is kiln's typed dataflow IR: a Module holds a main Func; a Func has
// parameters, constants, nodes in topological order and results; every Value is defined
// once (SSA) and carries a Type whose dims are constants or polynomials over named
// symbols ("batch", "s+1", "2*b*s").
//
// Ops are a typed enum (Op) with one row per op in the op table (OpInfo: arity, attribute
// struct, fusion Pattern, flags, type/shape inference). The table is assembled explicitly
// from per-family row lists (ops_*.go); nothing registers itself from init(). ONNX names
// appear only as the op table's names; the graph knows no ONNX and no devices.
//
// IR semantics are those of ONNX opset 17 with two normalizations: every Reduce* op takes
// its axes as input 1, and DFT takes its axis as input 2 (DFT-20's form). The loader
// upgrades older opsets into this form. GridSample accepts the mode names of opsets 16
// (bilinear, bicubic) and 20 (linear, cubic) alike (ParseGridSample). Ops newer than
// opset 17 have their latest form: GroupNormalization is GroupNormalization-21's (a scale
// and bias per channel, stash_type), into which the loader rewrites
// GroupNormalization-18.
//
// Shape arithmetic stays symbolic: Type.Known carries the symbolic element values of small
// integer tensors, so that Shape → Gather → Unsqueeze → Concat → Reshape keeps "[b,s,4,64]"
// instead of forgetting the batch and sequence extents. A dim keeps at most 64 terms of
// at most 16 symbols; past that it becomes a symbol of its own ("_big7"), unknown to the
// module, so that no model's shape arithmetic costs more than a bounded polynomial per
// operation.
//
// Unknown rank: a value whose rank the model leaves open (Type.UnknownRank; an If whose
// branches disagree, a Reshape to a shape of unknown length, an undeclared subgraph
// value) is accepted by every op. An op's inference uses what it knows (an LSTM's
// outputs are rank 4 and 3 whatever X's rank; a Shape's length is a fresh symbol); when
// an op's inference refuses an input of unknown rank, InferNode tries it again with
// that input at ranks 0 to 8 (probeRanks), and at the first rank it accepts gives the
// outputs that element type and unknown rank: the shape check waits until the node
// runs. A node no rank makes well typed keeps its error. Exporters guard rank changes
// with an If on an extent ("if x.shape[1] == 1: squeeze"); when inference can decide an
// If's condition (staticBool: a constant, or Equal of two known one-element values, through
// Not, Identity and Cast) the If has the taken branch's types instead of their merge.
//
// An extent that depends on an operand's value known only at run time (a Reshape
// target, Expand's shape, Range's bounds, run-time axes, sizes, pads or repeats) is a
// fresh symbol ("_d7"), never an assumption: the rank stays known wherever the operand's
// length is static (Squeeze and the reductions over run-time axes drop that many axes),
// and Expand to a run-time shape keeps only its input's static extents other than 1 (a
// symbolic one may be broadcast). The compiled engine binds such symbols on the host
// when the node runs.
//
// Cost: Verify and AddSymbol take constant time per lookup at any nesting depth; the
// attribute fields of each attribute struct type are read from its tags once.
//
// Sizes from a model are untrusted. Attribute fields used as divisors or extents carry a
// `min` tag (strides, dilations, kernel_shape, group, blocksize and LRN's size at least 1,
// pads and output padding at least 0, all at most MaxAttrExtent), checked by CheckAttrs
// before every inference. Dim arithmetic is checked: a constant or coefficient that
// leaves int64 gives an overflowed Dim that stays so. InferNode refuses an output type
// with a negative or overflowed extent or whose constant extents and element size do not
// multiply to a byte count within an int64 (CheckTypeSize, tensor.CheckedSize), so every
// size later computed from a static type fits.
//
// Sliding windows (Conv, ConvInteger, QLinearConv, ConvTranspose, MaxPool, AveragePool,
// LpPool) are resolved once: Window holds the per-axis kernel, strides, dilations and
// pads with ONNX's defaults, the padding mode (PadMode, auto_pad) and ceil_mode;
// Window.Axis gives an axis's output extent and the padding its windows see over a
// static input extent, Window.OutDim the output extent over a symbolic one (an
// expression where the stride divides evenly, else a derived symbol, SymbolDef: a
// floor division of an expression by the stride, which the generic executable computes
// when a call starts; a fresh symbol for ceil_mode's partial windows), and
// TransposedWindow adds ConvTranspose's output_padding and output_shape. Shape
// inference, the kernel definitions and the strategies all read the geometry from
// there, so a node's type and its kernel never disagree; an unknown auto_pad or a
// per-axis list of the wrong length is an inference error. kernels/ref keeps an
// independent implementation as the oracle.
//
// Storage is part of a tensor's type: Block is a channel block (NCHW{Block}c), Scope a
// memory scope; a texture (an RGBA image2d, one block of 4 per texel) has Block 4 and a
// Packing that maps the 4-D tensor onto the image: NCHW4c ("@tex", height N·C/4·H,
// width W), OIHW4o weights ("@texw", blocked by output channels, height O/4, width
// I·KH·KW) or NHWC4c ("@texnhwc", height N·H, width W·C/4). ImageSize measures a static
// one. The reference evaluator ignores storage.
//
// Invariants (checked by Verify): values are defined before use in their Func or an
// enclosing one; node outputs point back to their node; input/output counts and attribute
// struct types match the op table, attribute values their minimums; every tensor type
// passes CheckTypeSize; a blocked tensor is 4-D with its blocked axis a known multiple
// of the block; a texture has Block 4 and a known packing, a global value none;
// subgraphs name their parent. Print writes a stable text
// form; Parse reads it back (small constants included), which pass tests rely on.
//
// Errors: inference failures wrap ErrInfer and name the node; verifier findings wrap
// ErrVerify and name the function; parse errors wrap ErrParse with a line number.
//
// References: ONNX IR and operator specifications; TVM's Relay op patterns for fusion.
package graph
