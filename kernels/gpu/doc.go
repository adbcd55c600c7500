// Package gpu holds the GPU strategies of the operator inventory, one table for every
// GPU language: a schedule here is target-neutral across CUDA and OpenCL (it binds
// loops to thread axes; codegen's CUDADialect and OpenCLDialect print the same
// scheduled function), and it reads only the target's GPU limits (target.GPUFacts),
// never an ISA.
//
// Strategies(reg) is the table; per op its own rules, then the rules for every op in
// order:
//
//   - gpu-matmul-tiled, the rule ScheduleMatMulTiled, MatMul's and Gemm's own: float32
//     MatMul (operands of rank 2 or more, batch axes broadcasting, symbolic rows,
//     columns, K and batch) and Gemm (transposes, alpha, beta·C), with fused
//     elementwise epilogues. A block computes a BM×BN output tile (MatMulTile;
//     ChooseMatMulTile takes the largest of 64×64, 32×32, 16×16, 8×8 that the target's
//     threads per block and local memory allow, 32×32 at most for a product of constant
//     rows and columns ≤ 32) with TY×TX threads, each a register tile of contiguous rows
//     and columns; K runs in steps of BK, each step's A and B tiles copied into shared
//     memory by the block's threads (schedule's cooperative copy), with a barrier after
//     the copy and one before the next step overwrites the tiles
//     (loopir/passes.InsertBarriers). Tails (M, N, K not multiples of the tile) are
//     predicates. Anything else (other dtypes, a 1-D operand, a stage the register tile
//     cannot feed) is kernels.ErrNotApplicable and goes to the rules below.
//
//     Tensor cores: gpu-matmul-mma (MatMulMMAStrategy, the rule ScheduleMatMulMMA) is
//     not in Strategies; a backend puts it first when its recipe asks for TF32
//     (compiler's Backend.TensorCores), with a WarpMMA that the target's package
//     declares (intrin.MMATF32: mma.sync m16n8k8 on TF32 operands, sm_80 and later;
//     this package names no instruction). It takes what gpu-matmul-tiled takes, with
//     the same block tile, shared-memory k steps, register tile, tails and epilogues,
//     but its threads laid out as warps: threadIdx.x is the lane's column group (4),
//     threadIdx.y its row group (8), threadIdx.z the warp, so a warp's lanes are
//     g·4 + t as the instruction's fragments need; each thread owns 4 contiguous rows
//     and 8 contiguous columns (MMATiles: 128×32, 64×32 or 32×32 blocks of 4, 2 or 1
//     warps), and its step (k within the step, its rows and columns) is tensorized
//     (schedule.Tensorize) onto the intrinsic, the row and column tails becoming the
//     call's per-lane extents and K's its k extent. A call that a condition could make
//     a lane skip, a target the intrinsic does not support (OpenCL, CUDA below
//     sm_80) and whatever the tiled rule refuses are kernels.ErrNotApplicable, so the
//     exact float32 rules build the node.
//
//   - gpu-conv-gemm (ConvGEMMStrategy), the rule ScheduleConvGEMM, not in Strategies
//     (measured slower than gpu-reduce: see ConvGEMMStrategy): a 2-D float32 convolution
//     of one group (any stride, dilation and pads, auto_pad resolved; static channels
//     and spatial extents, a symbolic batch) as an implicit GEMM on the tiled
//     product's schedule: rows the M output channels, columns the OH·OW output pixels
//     of one image (the batch on blockIdx.z), K = C·KH·KW; the kernel writes a
//     [N, M, OH·OW] view of the output. The weight tile is copied from the weights'
//     M×K view (OIHW in its own order); the input tile is conv_im2col's, a gather stage
//     inlined into the tile's cooperative copy rather than into the product, so each
//     k step's copy computes its elements from the input: a tap in the padding is a
//     zero under a select, its read clamped into the input, never out of bounds. A
//     pointwise convolution (1×1, stride 1, no pads) reads the input as its
//     [N, C, H·W] view and gathers nothing. Epilogues are those of the product
//     (bias, the Add of a residual, Relu, Clip, any elementwise or broadcasting op),
//     an operand other than a stage read through a [N, M, OH·OW] view of it (its own
//     axes broadcast, the pixels flattened). ChooseConvTile takes the largest of
//     MatMulTiles with at least MinConvThreads (64) threads that gives ComputeUnits
//     blocks or more, else the smallest of them: resnet18's 64 channels × 112·112
//     pixels take 64×64 tiles, its last layers' 512 × 7·7 take 16×16 (128 blocks;
//     K is not split across blocks). Grouped and depthwise convolutions, 1-D and 3-D
//     ones, symbolic spatial extents and other dtypes are kernels.ErrNotApplicable
//     with the reason, and gpu-reduce takes them.
//
//   - gpu-injective, the rule ScheduleInjective, for every op whose compute definition
//     is elementwise, broadcasting or injective (the definition of package kernels,
//     unchanged): intermediate stages inlined into the output, the output's loops fused
//     into one loop over its elements, split by the block size (BlockSize: DefaultBlock
//     256 capped by the target's MaxWorkGroup, or the element count when smaller), the
//     outer loop bound to blockIdx.x and the inner to threadIdx.x. A fused extent that
//     the block does not divide leaves a predicate on the block, so the tail's threads
//     do nothing; a symbolic extent gives a grid over the runtime dims
//     (loopir/passes.DeriveLaunch reads it off the bound loops: ((n·15 + 255) / 256)
//     blocks of 256 for an n×3×5 output). Indices read from data (Gather) are checked in
//     the kernel, which reports the first bad one in the device's status block
//     (codegen's doc).
//
//   - gpu-reduce, the rule ScheduleReduce, for definitions with one reduction stage
//     after inlining (the Reduce ops, ArgMax/ArgMin, MatMul, Gemm, Conv in every group
//     and dilation, MaxPool/AveragePool/LpPool, the global poolings), optionally
//     followed by one stage that does not reduce (a mean's division, Gemm's or Conv's
//     bias, a fused epilogue): one thread per element of the reduction, its spatial
//     loops fused, split and bound as above, its reduction loops serial inside the
//     thread after the accumulator's init (decompose_reduction; a reduction loop the
//     definition puts outside a spatial one is moved inside by reorder). The following
//     stage runs in the same thread on the element just reduced (reverse_compute_at),
//     and the reduction's buffer (and an arg-reduction's running value) becomes one
//     private element per thread (loopir/passes.PrivatizeLocal). Before a kernel is
//     accepted, its launch is derived and verified against the target; one the launch
//     rules refuse is not applicable.
//
//     Few outputs, long reductions: gpu-reduce-tree, the rule ScheduleReduceTree,
//     before gpu-reduce in the table. When the number of output elements is a constant
//     below ComputeUnits × the block (one thread per element would leave compute units
//     idle: a sum to a scalar, GlobalAveragePool of one image) and each reduces at
//     least TreeMinReduce (32) elements or a symbolic number, each output element gets
//     a block of TreeThreads threads (the largest power of two at most the reduction's
//     length, at most DefaultTreeBlock 256 and the target's work-group): the output
//     stage (O, or a local copy of R that cache_write adds) is bound to blockIdx.x over
//     its elements with a thread loop of one iteration (add_unit_loop), R moves under
//     it (compute_at) and the block's threads reduce it together (schedule's
//     all_reduce: strided partials, a tree in shared memory), thread 0 writing the
//     element. GlobalAveragePool 1×512×7×7 on 108 compute units: 512 blocks of 32.
//     ArgMax and ArgMin carry their index through the tree (ties to the smaller
//     index, as the scan), and Hardmax, an arg-reduction read back per row, takes this
//     rule with its row split among the threads. A reduction all_reduce refuses and a
//     kernel the launch rules refuse are not applicable there, and gpu-reduce takes
//     them.
//
//   - gpu-rows, the rule ScheduleRows, for definitions of several stages over shared rows
//     (the softmax family, LayerNormalization, InstanceNormalization, LpNormalization):
//     what inlines is inlined; the output's row axes (those it reads the statistics at) are
//     moved first, fused, split by the block size (DefaultRowBlock 64, capped by the
//     target, or the row count when smaller) and bound, so one thread runs one row; every
//     other stage moves under the thread loop (schedule's compute_at, consumers first),
//     which allocates its buffer there over the thread's row: a thread reduces its row's
//     statistics into its own local buffers (one element each for these ops) in the
//     normalized axes' serial loops, then writes its row. A softmax over n × 6 × 13 on axis
//     1 has n·13 rows: grid ((n·13 + 63) / 64) of 64. Refused (kernels.ErrNotApplicable): a
//     single stage, an output that reduces or reads its statistics at none of its axes (one
//     group over the whole tensor: a softmax over a vector), a stage writing a function
//     output (LayerNormalization returning its mean), a stage compute_at cannot place under
//     the thread loop (stages that do not share the rows, regions that are not constant),
//     and more than MaxRowLocal (64) elements of per-thread storage. BatchNormalization at
//     inference has one stage: the injective rule takes it. A definition whose output reads
//     a reduction at every one of its axes (a convolution or Gemm with its bias added in a
//     second stage, ReduceMean, GlobalAveragePool) is rows of one element: one thread per
//     output element, its reduction in a one-element buffer of its own.
//
//     Long rows: gpu-rows-tree, the rule ScheduleRowsTree, before gpu-rows in the
//     table. Rows of at least TreeMinRow (64) elements or a symbolic number, fewer than
//     ComputeUnits × DefaultRowBlock rows or a symbolic number (with more, one thread
//     per row already fills the device), and statistics that are all sums, products,
//     maxima, minima or arg-reductions run one block per row: the row axes fused and
//     bound to blockIdx.x (the grid is the row count), the normalized axes fused, split
//     by TreeThreads and the thread part bound to threadIdx.x outside the rest, so
//     thread t writes the row's elements t, t + threads, …; each statistic moves under
//     the thread loop (compute_at) and is reduced by the block's threads together
//     (all_reduce), every thread keeping the result in its own one-element buffer.
//     BERT's LayerNormalization over 128 × 768: 128 blocks of 256, each statistic three
//     elements per thread and an eight-level tree. Rows below the threshold, a
//     statistic all_reduce refuses or a kernel the launch rules refuse are not
//     applicable there, and gpu-rows takes them.
//
// Textures (OpenCL image2d, loopir.ScopeTexture): kernels whose tensors live in RGBA
// float32 images, packed NCHW4c (activations) and OIHW4o (weights), one thread per
// output texel (four channels of one pixel) so that each thread writes a whole texel.
// ScheduleTextureInjective is the injective rule over a 5-D output [N, C/4, H, W, 4]:
// the four outer loops fused, split and bound, the lane loop innermost in the thread;
// Texturize then moves the chosen parameters into textures of their packings.
// TexConv2D.Func is a direct convolution (any stride, dilation and pads, optional
// bias; group 1, over a plain first-layer input whose channels are no multiple of 4
// (PlainX), or depthwise) built as loop IR: a thread accumulates its four output
// channels in a private buffer over the input's channels and the window's taps (a tap
// in the padding is skipped, never read), applies its epilogue (Relu, Clip with
// constant bounds, the Add of a residual tensor blocked like the output) and writes
// them as one texel. TexPool2D (max, average with or without the pads, global) and
// TexConcat (channel concatenation of blocked inputs) are built the same way.
// Definitions and parameters these do not take are ErrNotTexture. TextureLayoutPolicy
// is alter-layout's policy when textures are on: convolutions TexConv2DOf takes are
// anchors (output in blocks of 4; input too unless PlainX; an output no reader wants
// blocked stays plain, PlainOut); elementwise ops over same-shaped blocks of 4,
// poolings and channel concats keep blocks (a global pool writes a plain [N, C, 1, 1]).
// TextureWrites and TextureReads are annotate-scopes' policy for the same kernels, a
// fused convolution with its epilogue included (NCHW4c activations, OIHW4o weights; an
// operand may still be left global: GlobalX, GlobalW, GlobalY). TextureConvStrategy
// (fused form included), TexturePoolStrategy, TextureConcatStrategy and
// TextureInjectiveStrategy (ScheduleTextureInjective, then Texturize by the scopes) are
// the kernels.Strategies whose operands follow the scopes annotate-scopes chose, a
// convolution's weight prepacked into OIHW4o (PackOIHW4o; a depthwise weight is read as
// it is). They are not in Strategies: the OpenCL backend's texture path
// (compiler.OpenCLTextures) tries them first when the device has images.
//
// Elementwise epilogues fuse into the same kernel under every rule
// (kernels.GenericFused, then the rule inlines the chain into the output stage).
// Refused with kernels.ErrNotApplicable, so that with no other strategy in the table
// lowering such a node fails with kernels.ErrNoKernel and the node runs on the CPU: a
// definition with several reduction stages that share no rows, a stage that cannot
// be inlined or follow the reduction in its thread, a node with several outputs
// (MaxPool with Indices), and a target that is not a GPU. A 3×3 depthwise convolution or a matmul over a short constant K has no
// reduction left (its taps are unrolled in the definition) and takes the injective
// rule.
//
// The thresholds are chosen from the target's facts only (compute units, work-group
// size): on a GPU a block per row reads a row with consecutive threads at consecutive
// addresses and keeps every compute unit busy; on an OpenCL device that runs
// work-items on CPU cores (PoCL) the barriers cost more than they give
// (TestLayerNormTreeAgainstOneThreadPerRowOnOpenCL measures both), which the rows-count
// threshold limits to devices with few rows per compute unit.
//
// Not yet here: warp-level steps of the tree without barriers, a convolution's K split
// across blocks (few output pixels and channels leave compute units idle), vectorized
// loads, and more than one output stage per kernel.
//
// Invariants: a strategy only calls schedule primitives, which check their
// preconditions (bind's among them), so it cannot produce a wrong kernel, only fail;
// the strategies are differential-tested against kernels/ref with tails and symbolic
// extents (injective: elementwise, broadcasting, a fused chain, cast, where, transpose,
// concat, gather; reduce: Reduce ops over inner, outer, middle, several and all axes,
// ArgMax/ArgMin, MatMul 2-D, batched and broadcast, Gemm with transposes and bias, Conv
// with pads, strides, 1×1, depthwise, groups, dilation and bias, Conv+Add+Relu fused,
// Max/AveragePool with pads and count_include_pad, GlobalAveragePool; rows: the softmax
// family on the last and a middle axis, a symbolic row length, layer, instance, Lp and
// batch normalization, a softmax with a fused epilogue; tiled: MatMul with tails on
// every axis, symbolic rows and batches, broadcast batches, Gemm with transposes, alpha
// and beta·C, an epilogue, the same cases under gpu-matmul-mma with a stand-in intrinsic
// of the MMA's description whose C implementation is its per-thread meaning; implicit
// GEMM: the convolutions of resnet18 and resnet50 (the 7×7 stride-2 stem, 3×3 and 1×1 at
// strides 1 and 2, 512 channels over 7×7), mobilenet_v2's pointwise ones, 3 channels
// over 13×13 into 10 with asymmetric pads, a dilation and a stride per axis, a symbolic
// batch, with and without a bias, Relu, Clip, a residual Add and a per-channel scale;
// block-wide: softmax and LayerNormalization over rows of 1,
// 63, 64, 65, 768 and 1000, softmax and log-softmax over a symbolic row length, a
// middle axis, an epilogue, instance and Lp normalization, sums, maxima, minima and a
// mean to a scalar over 10⁵ elements, over two axes and over a symbolic axis, an int32
// sum, GlobalAveragePool 1×512×7×7, ArgMax, ArgMin with the last index and Hardmax over
// long axes with many ties): every case's launched kernel runs on the CPU with its
// blocks and threads in turn (the launch's meaning, with a canary past each output for
// a tail written out of bounds; a kernel with barriers runs each block's threads in
// lock-step phases between them, a loop's last phase continuing into its next
// iteration, so a missing barrier gives a wrong result; the block-wide cases also with
// the threads in reverse order, which a read of another thread's write in the same
// phase does not survive), compiles with NVRTC for sm_80, and runs printed in OpenCL C
// on the OpenCL device (PoCL in CI) and in CUDA C on a CUDA device where one is
// present; on both an index out of range fails the launch through the status block.
// Every node of the model zoo lowers for the OpenCL device or is refused, and the
// reductions and rows among them run there at their real shapes against the reference.
package gpu
