// Package gpu holds the GPU strategies of the operator inventory, one table for every
// GPU language: a schedule here is target-neutral across CUDA and OpenCL (it binds loops
// to thread axes; codegen's CUDADialect and OpenCLDialect print the same scheduled
// function), and it reads only the target's GPU limits (target.GPUFacts), never an ISA.
//
// Strategies(reg) is the table: gpu-injective, the rule ScheduleInjective, for every
// op whose compute definition is elementwise, broadcasting or injective (the definition
// of package kernels, unchanged): intermediate stages inlined into the output, the
// output's loops fused into one loop over its elements, split by the block size
// (BlockSize: DefaultBlock 256 capped by the target's MaxWorkGroup, or the element count
// when smaller), the outer loop bound to blockIdx.x and the inner to threadIdx.x.
// Elementwise epilogues fuse into the same kernel (kernels.GenericFused, then the same
// rule inlines the chain). A fused extent that the block does not divide leaves a
// predicate on the block, so the tail's threads do nothing; a symbolic extent gives a
// grid over the runtime dims (loopir/passes.DeriveLaunch reads it off the bound loops:
// ((n·15 + 255) / 256) blocks of 256 for an n×3×5 output). Indices read from data
// (Gather) are checked in the kernel, which reports the first bad one in the device's
// status block (codegen's doc). A definition with a
// reduction or with a stage that cannot be inlined, and a target that is not a GPU, are
// kernels.ErrNotApplicable; with no other strategy in the table, lowering such a node
// fails with kernels.ErrNoKernel.
//
// Not yet here: reductions (softmax, norms, pooling), matmul and convolution (shared
// memory tiles), vectorized loads, and more than one output stage per kernel.
//
// Invariants: a strategy only calls schedule primitives, which check their
// preconditions (bind's among them), so it cannot produce a wrong kernel, only fail;
// the strategies are differential-tested against kernels/ref with tails and symbolic
// extents (elementwise, broadcasting, a fused chain, cast, where, transpose, concat,
// gather): every case's launched kernel runs on the CPU with its blocks and threads in
// turn (the launch's meaning, with a canary past each output for a tail written out of
// bounds), compiles with NVRTC for sm_80, and runs printed in OpenCL C on the OpenCL
// device (PoCL in CI) and in CUDA C on a CUDA device where one is present; on both an
// index out of range fails the launch through the status block.
package gpu
