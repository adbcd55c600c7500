// Package gpu holds the GPU strategies of the operator inventory, one table for every
// GPU language: a schedule here is target-neutral across CUDA and OpenCL (it binds
// loops to thread axes; codegen's CUDADialect and OpenCLDialect print the same
// scheduled function), and it reads only the target's GPU limits (target.GPUFacts),
// never an ISA.
//
// Strategies(reg) is the table, its rules tried in order: gpu-matmul-tiled
// (ScheduleMatMulTiled) first for MatMul and Gemm; gpu-injective, the rule
// ScheduleInjective, for every op whose compute definition is elementwise, broadcasting
// or injective (the definition of package kernels, unchanged): intermediate stages
// inlined into the output, the output's loops fused into one loop over its elements,
// split by the block size (BlockSize: DefaultBlock 256 capped by the target's
// MaxWorkGroup, or the element count when smaller), the outer loop bound to blockIdx.x
// and the inner to threadIdx.x. Elementwise epilogues fuse into the same kernel
// (kernels.GenericFused, then the same rule inlines the chain). A fused extent that the
// block does not divide leaves a predicate on the block, so the tail's threads do
// nothing; a symbolic extent gives a grid over the runtime dims
// (loopir/passes.DeriveLaunch reads it off the bound loops: ((n·15 + 255) / 256) blocks
// of 256 for an n×3×5 output). Indices read from data (Gather) are checked in the
// kernel, which reports the first bad one in the device's status block (codegen's doc).
// A definition with a reduction or with a stage that cannot be inlined, and a target
// that is not a GPU, are kernels.ErrNotApplicable for it; when no rule applies,
// lowering the node fails with kernels.ErrNoKernel.
//
// gpu-rows, the rule ScheduleRows, for definitions of several stages over shared rows
// (the softmax family, LayerNormalization, InstanceNormalization, LpNormalization):
// what inlines is inlined; the output's row axes (those it reads the statistics at) are
// moved first, fused, split by the block size (DefaultRowBlock 64, capped by the
// target, or the row count when smaller) and bound, so one thread runs one row; every
// other stage moves under the thread loop (schedule's compute_at, consumers first),
// which allocates its buffer there over the thread's row: a thread reduces its row's
// statistics into its own local buffers (one element each for these ops) in the
// normalized axes' serial loops, then writes its row. A softmax over n × 6 × 13 on axis
// 1 has n·13 rows: grid ((n·13 + 63) / 64) of 64. Refused (kernels.ErrNotApplicable): a
// single stage, an output that reduces or reads its statistics at none of its axes (one
// group over the whole tensor: a softmax over a vector), a stage writing a function
// output (LayerNormalization returning its mean), a stage compute_at cannot place under
// the thread loop (stages that do not share the rows, regions that are not constant),
// and more than MaxRowLocal (64) elements of per-thread storage. BatchNormalization at
// inference has one stage: the injective rule takes it. A definition whose output reads
// a reduction at every one of its axes (a convolution or Gemm with its bias added in a
// second stage, ReduceMean, GlobalAveragePool) is rows of one element: one thread per
// output element, its reduction in a one-element buffer of its own (a float32 Gemm
// takes gpu-matmul-tiled before).
//
// gpu-matmul-tiled takes float32 MatMul (operands of rank 2 or more, batch axes
// broadcasting, symbolic rows, columns, K and batch) and Gemm (transposes, alpha,
// beta·C), with fused elementwise epilogues: a block computes a BM×BN output tile
// (MatMulTile; ChooseMatMulTile takes the largest of 64×64, 32×32, 16×16, 8×8 that the
// target's threads per block and local memory allow, 32×32 at most for a product of
// constant rows and columns ≤ 32) with TY×TX threads, each a register tile of
// contiguous rows and columns; K runs in steps of BK, each step's A and B tiles copied
// into shared memory by the block's threads (schedule's cooperative copy), with a
// barrier after the copy and one before the next step overwrites the tiles
// (loopir/passes.InsertBarriers). Tails (M, N, K not multiples of the tile) are
// predicates. Anything else (other dtypes, a 1-D operand, a stage the register tile
// cannot feed) is kernels.ErrNotApplicable.
//
// Not yet here: single-stage reductions, convolution (shared memory tiles),
// a row reduced by several threads (a tree in shared memory: a long row is one thread's
// serial loop, and a row along the last axis is read with a stride between threads),
// vectorized loads, and more than one output stage per kernel.
//
// Invariants: a strategy only calls schedule primitives, which check their
// preconditions (bind's among them), so it cannot produce a wrong kernel, only fail;
// the strategies are differential-tested against kernels/ref with tails and symbolic
// extents (elementwise, broadcasting, a fused chain, cast, where, transpose, concat,
// gather; the softmax family on the last and a middle axis, a symbolic row length,
// layer, instance, Lp and batch normalization, a softmax with a fused epilogue, global
// average pooling, Gemm and convolution with a bias; matrix products with tails,
// symbolic rows and batches, Gemm, an epilogue): every case's launched kernel runs on
// the CPU with its blocks and threads in turn (the launch's meaning, with a canary past
// each output for a tail written out of bounds; a kernel with barriers runs each
// block's threads in lock-step phases between them, a loop's last phase continuing
// into its next iteration, so a missing barrier gives a wrong result), compiles with
// NVRTC for sm_80, and runs printed in OpenCL C on the OpenCL device (PoCL in CI) and in
// CUDA C on a CUDA device where one is present; on both an index out of range fails the
// launch through the status block.
package gpu
