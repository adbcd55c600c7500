// Package cpu holds the CPU strategies of the operator inventory: for a compute
// definition from package kernels, a schedule (split, reorder, parallel, tensorize...)
// with its knobs (tile sizes and the like: the default rule's values, or a tuning record's), expressed as
// schedule primitives so that every decision lands in the trace.
//
// Strategies(reg) is the CPU table: conv2d-winograd-tensorized (3×3, stride 1, at least
// 128 input channels and 7 output tiles a side: Winograd F(2×2, 3×3), weights transformed
// on the host and stored in column panels of the micro-kernel's width, the 16 products on
// the micro-kernel (column tiles outermost where a plane's weights pass 1 MiB), transforms
// with their selects unrolled away), conv2d-pointwise-tensorized (pointwise.go: a 1×1, stride-1,
// unpadded convolution over plain NCHW data of at least minPointwisePixels pixels, as
// the product w[M, C]·x[C, H·W]: the micro-kernel's rows are output channels and its
// columns a channel's contiguous pixels, so x is read and the NCHW output written in
// place, with no padded copy and no unpacking; bias and epilogues run on each tile right
// after its one zero-initializing micro-kernel call, the tile in stack scratch),
// conv2d-nchwc-tensorized (float32 2-D convolution with constant weights and one group:
// pack, micro-kernel conv, unpack with bias in one kernel; a kernel dilated along the
// row packs each output column's input columns side by side, so the merged kernel
// column·channel axis stays contiguous; unpadded blocked data, and
// plain data under a 1×1 kernel, are read in place with no padded copy; a 1×1 kernel
// over one input channel block calls the micro-kernel's zero-initializing form once
// per tile, the whole reduction, with no init pass; so does a 1×1 one over several
// blocks (blocksByDefault: an input of at most 1 MiB, rows of two tiles or more), with
// the Blocks form (intrin.Gemm: the reduction over input channel blocks, kernel rows
// and the merged kernel column·channel axis inside one call), while the others make a
// call per channel block and kernel row (ConvConfig.SplitK, the knob split_k), all of
// a channel block's rows under each call's weight panel where the block's map is small
// (rowsInnerByDefault, the knob rows_inner);
// ConvConfig is its knobs; the unpacking,
// bias and epilogues run under the output row loop on a row-sized local buffer, for a
// blocked output and for a plain one, computed as its [N, M/sb, sb, OH, OW] view (sb:
// SplitBlock, the block where it divides M, else M itself when M is less than a block;
// other channel counts unpack in a pass of their own) so that the unpacking reads the
// row at permuted iterators, vectorized along the channels of a block), conv2d-depthwise-nchwc (depthwise.go: float32 2-D convolutions with one group
// per input channel and any channel multiplier, constant weights repacked on the host to
// [M/B, KH, KW, B], static padding (explicit, VALID, or SAME over static extents), any
// kernel, strides and dilations; computed in blocks of B output channels, B the block the
// input is stored in or else the tensorized convolutions' tile width, else a vector or
// a half or quarter of one (depthwiseBlock), refused when none divides the channels;
// a block narrower than the vector (AVX-512 over blocks of 8) at horizontal stride 1 on
// rows of 28 columns or more computes several adjacent columns in one vector
// (depthwisePair: their inputs are one contiguous run of the padded row, the weights
// packed with the lanes repeated):
// per output row (batch·block·row, parallel) the padded input rows its window spans are
// copied into a row-sized buffer (for a depthwise block, per band of up to the knob
// rows output rows, default 8, dividing the height: each input row copied once per
// band) — except where a written-out tile reads an input stored in the block's own
// channel blocks, one column a vector, without a multiplier (readsInPlace): the pad
// is inlined and the tiles read the input where it is stored, the lowering's
// partition-boundary-loops leaving the zero test to the border rows and tiles — then the
// row's columns are computed in register tiles (depthwise_tile.go: tiles of the largest
// width up to the knob tile_w, default 8, that divides the row, for kernels of at most
// max_taps taps, default 9 (3×3), the block's lanes an
// `omp simd` loop around the tile's columns and all the taps, written out, so each
// column's sum stays in a vector register from its zero to its one store, and a tap's
// weights and an input vector are loaded once per tile; a kernel of more taps, as
// 5×5 and ConvNeXt's 7×7, one call per tile of the target's depthwise intrinsic
// (intrin.DepthwiseTile, where a vector of 16, 8 or 4 lanes divides the block: the
// sums in registers, the taps a loop advancing every column's sum; written out, 25 taps
// make each column one long chain of dependent multiply-adds, and 49 exceed gcc's
// dependence analysis, the sums going through memory); tile_w 0 accumulates tap by
// tap over the whole row through memory instead), and the bias and fused epilogues run
// on the row buffer, written blocked or unpacked to NCHW; symbolic extents are left to
// generic), conv2d-grouped-tensorized
// (depthwise_gemm.go: grouped convolutions whose groups' output channels are the width
// of a declared tile, as RegNet's groups of 8 on AVX2: GroupedConvBlocked is
// ConvNCHWBlocked with one input block per group, so each output block's products run on
// the micro-kernel over its own group's block, scheduled by ScheduleConvBlocked; its
// padded copy reads a group's channels through groupInput (grouped_read.go), which
// writes the storage block and lane without dividing the channel where groups and the
// input's blocks nest, so the copy of a group's channels is a contiguous vector run),
// conv2d-grouped-nchwc
// (depthwise_grouped.go: the same for grouped convolutions of several input channels per
// group, blocks of one vector, or of a whole group when it is narrower, that lie within
// one group: the row buffer holds the group's input channels, each broadcast across the
// lanes), matmul/gemm-packed-tensorized (constant B packed into panels on the host;
// A's leading extents, flattened into rows, may be symbolic: the row tiles then end in a
// tile the micro-kernel takes as partial at run time, and the epilogues view the rows
// back under the output's symbolic extents; with few row blocks the parallel loop
// runs over row block × column panel pairs so that two threads split a 128-row
// product evenly), matmul-batched-tensorized (both operands computed at run time, as
// attention's Q·Kᵀ and P·V: the micro-kernel reads B's rows in place, one parallel loop
// over batch × row tile × column tile, or column tile × row tile where one batch
// element's B passes 1 MiB), rnn-loops for LSTM/GRU/RNN (sequence
// length and batch static or symbolic), scatter-loops for ScatterElements and ScatterND,
// topk-loops for TopK with a constant k, det-loops for Det, roialign-samples-per-region
// for RoiAlign (roialign.go: the definition's sample stages computed under the region
// loop, once per region, not inlined into every channel), layout-unblock-tiled for a
// LayoutTransform from channel blocks to plain NCHW (layout_unblock.go: a block's
// channels inside each image row, so the row's tile is read from memory once, not once
// per channel), conv-integer-blocked for ConvInteger and QLinearConv with constant
// weights (conv_integer.go: the blocked convolution's stages on int16 operands, x minus its
// zero point copied into the padded channel blocks channel by channel, the weights
// minus theirs packed as int16 pairs, each tile's whole reduction one call of the
// integer micro-kernel, intrin.GemmInt, exact in int32; the quantized ISNet's 3×3
// layers ran about six times as fast as on the padded strategy; QLinearConv's
// requantization runs on the result's row, kernels.QLinearConvRequantize; a QLinearConv
// is a layout anchor, integerAnchor, its uint8 maps stored in channel blocks and read in
// place by the 8-bit form), conv-integer-depthwise for a depthwise QLinearConv
// (conv_integer_depthwise.go: DepthwiseNCHWc on x − zx and w − zw as float32, exact
// integers, then the requantization), conv-integer-padded for the other ConvInteger and
// QLinearConv (quant.go: the generic rule, but the zero-padded int32 input stays a
// stage of its own, so the product reads rows unguarded and vectorizes along them,
// along the whole flattened image at stride 1: squeezenet 1.1 with every Conv
// dynamically quantized took 189 ms of kernel time per inference at 2 threads, 669 ms
// with the product vectorized along one output row of 13 to 55 columns), and the
// generic rule ScheduleGeneric for every
// other op with a definition: elementwise stages inlined (except a stage calling a
// transcendental function that a reduction reads without one of its own iterators, such
// as an STFT's twiddle table read for every frame: it keeps its buffer, each element
// computed once), leading spatial loops fused
// and parallel when the block does enough work, innermost spatial loop vectorized, and
// the innermost spatial loop moved inside the reductions when the inputs stream along
// it (a symbolic extent counts as long enough: the C compiler's vector loop takes any
// run-time trip count, with a scalar tail); where the inputs stream along the innermost
// reduction instead (a row's max, sum or sum of squares in softmax and LayerNorm), the
// reduction stays innermost, its init is decomposed out and it runs as a vector
// reduction; so it does when a load steps by more than one element along the spatial
// loop while streaming along a long innermost reduction (a strided convolution with a
// long kernel: vector dot products over the taps, not gathers). ScalarStrategies(reg) is the generic rule alone (no packed, tensorized or
// Winograd kernels, so no blocked operand): a second table for the same target, as a
// backend other than the CPU's may use.
//
// The definitions only the CPU's tensorized strategies use live here too, beside their
// host packing: ConvNCHWBlocked (NCHW in and out, NCHWc inside one kernel; weights
// packed by PackConvWeights) and Conv2DNCHWc (blocked in and out), DepthwiseNCHWc
// (weights packed by PackDepthwiseWeights), GroupedNCHWc (PackGroupedWeights) and
// GroupedConvBlocked (PackConvWeights over a group's channels), MatMulPacked (B, and
// optionally A, repacked into panels inside the kernel) and MatMulPrepacked (B in column
// panels packed at compile time by PackMatMulB). This package is where the target's ISA
// is read (intrin.GemmTile, DefaultRNN): it picks the micro-kernels and passes vector
// widths to the target-neutral definitions of package kernels as parameters. The
// micro-kernel is chosen per layer from the product's columns (a convolution's output
// channels, a matmul's columns) and rows (a convolution's output row, convGemm; a
// matmul's rows): the tile that pads them least, so no shape loses the tensorized
// strategies (or computes a mostly empty last tile) to the host's default tile width. The blocked layout's anchor
// (LayoutPolicy) takes the same choice, so a blocked convolution output's block is the
// width of the tile that writes it; it anchors depthwise convolutions too, in the block
// depthwiseBlock chooses, and grouped ones in groupedBlock's, reading their input as it
// is stored.
//
// Recurrent layers (RNN, rnn_build.go) have no compute definition: their loop nest is
// built directly, per direction an input projection for all time steps on the GEMM
// micro-kernels, then a serial time loop of recurrent products and gate math.
// RNNOptions are its knobs and RNNVector the vector unit the float32 products are
// declared for (DefaultRNN reads it from the target; Lanes 0 keeps plain loops): weights
// are packed in column panels (on the host when constant, else by the kernel) and each
// product calls intrin.GemmF32 micro-kernels. The sequence length and batch may be
// symbolic (input and hidden sizes come from the weights and stay static): loops run to
// the runtime extents, scratch buffers are allocated at run time (at least one
// element), the weights are packed for the tiles of one row and each product runs blocks
// of six rows, then pairs, then a last row on the micro-kernel for that many rows, and a
// projection that may run in parallel tests its size at run time (rnn_sym.go,
// rnn_gemm_sym.go).
//
// Scatters (Scatter, scatter.go) and TopK (TopK, topk.go) are loop nests built directly
// too. A scatter copies the data to the output (in parallel when large), then applies
// the updates serially in their row-major order, each index through loopir.IndexCheck
// (one outside [-n, n) fails the kernel and the update lands at a clamped index meanwhile;
// along an axis empty at run time the indices are only checked and nothing is written):
// O(output + updates), and with duplicates the last update wins or the reduction folds
// them in order, as kernels/ref does. TopK keeps, per row, the best k elements seen so
// far in the outputs themselves, in order: an element that beats the last slot shifts
// the slots it beats down one and takes its place, so ties keep the lower index first;
// O(d) per row plus O(k) per element that enters the top k. NaN ranks above every
// number. A run-time k (the output's extent then depends on data) is refused.
//
// Det (det.go, strategy det-loops) has no compute definition either: each pivot is
// chosen from the data, so its loop nest is built directly: per matrix a float64 copy
// and Gaussian elimination with partial pivoting, static extents only.
//
// Invariants: a strategy only calls schedule primitives, which check their
// preconditions, so a strategy cannot produce wrong code, only fail; strategies are
// differential-tested against kernels/ref with tails (extents not divisible by tiles)
// and symbolic extents.
package cpu
