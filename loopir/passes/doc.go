// Package passes holds the target-aware lowering passes that run on a scheduled PrimFunc
// before code generation, as a table (Pipeline) of named passes:
//
//   - LowerBlocks replaces each Block by its body with the iterators substituted by their
//     bindings; a reduction's init runs under the condition that every reduction
//     iterator is at its first value.
//
//   - Flatten turns multi-dimensional buffer indices into row-major linear indices.
//
//   - UnrollLoops writes out unrolled loops of constant extent up to 16, the variable
//     replaced by each value (and fresh variables for the loops inside each copy).
//
//   - Simplify applies the arithmetic simplifier with loop ranges known, and drops
//     branches whose condition it decides (selects too: after UnrollLoops, a select over
//     the unrolled variable picks its branch).
//
//   - PartitionBoundaryLoops (CPU only) splits a serial loop of constant range whose
//     body tests its own variable against a bound (a padding's zero test, a clamp's
//     limits) into the ranges where every such test is decided, each simplified over
//     its own range, at most 3 pieces a loop and 4096 copied stores a function: a
//     convolution reading its input through the padding's select reads it plainly
//     except at the borders.
//
//   - UnswitchInvariantSelect (CPU only) splits an innermost loop on a select between
//     loads and constants whose condition does not change inside it (if c { loop with
//     the true side } else { ... the false side }), a select chain's head first, at most
//     32 copies a function, never a loop that allocates or checks an index read from
//     data: a concatenation's chain over its inputs and a padded copy's bounds test
//     leave the lane loop as a plain vectorizable copy.
//
//   - HoistInvariantIf moves the loop-invariant conjuncts of a loop's guard above the
//     loop (split tails then stop blocking vectorization of the loops below them).
//
//   - TightenLoopGuard (CPU only) turns a guard v + b < B on a serial or vectorized
//     loop's own variable into the loop's extent, min(ext, B - b): a split tail's
//     epilogue loop then vectorizes (gcc does not vectorize the guarded loop).
//
//   - ReuseLocalStorage lets local buffers with disjoint lifetimes (over the top-level
//     statements) share one allocation of the larger size.
//
//   - InsertBarriers (GPU only) puts a work-group barrier wherever a statement reads a
//     shared buffer other threads wrote since the last barrier, or writes one they read
//     (a cooperative copy is followed by a barrier, and a loop that rewrites a tile
//     waits for the previous round's readers: the double-barrier pattern). Barriers go
//     only where every thread of a block reaches them; one needed under a condition on
//     the thread index is a BUG.
//
// Vectorization and longer unrolled loops are loop kinds the C dialect turns into
// compiler hints (omp simd, omp simd reduction, unroll pragmas), and tensor intrinsics carry
// their own vector code.
//
// GPU kernels (GPUPipeline, the same passes with PrivatizeLocal after LowerBlocks and
// InsertBarriers last) are one launch each. PrivatizeLocal makes a local buffer
// allocated around loops bound to thread axes per-thread storage: allocated inside the
// innermost bound loop on the way to its accesses, shrunk to the region one thread
// touches (affine indices with constant coefficients, at most 1024 elements), indices
// rebased to it. After the pipeline, DeriveLaunch reads the geometry off the loops
// bound to thread axes (loopir.Launch: grid extents over the runtime dims, block
// extents constant) and guards a thread loop whose extent is below its block extent (a
// tail); VerifyLaunch checks it against the target's target.GPUFacts (threads per
// block at most MaxWorkGroup, shared buffers together at most LocalMemBytes) and that
// the grid is what a kernel table can evaluate at run time. Both refuse with ErrLaunch
// naming the kernel; DeriveLaunch also refuses a tail guard around a barrier (the
// guarded-off threads would never reach it). Every store runs under every bound loop,
// so each thread does its own part of the work and no memory is written once per
// redundant thread.
//
// Textures: FlattenTextures (in GPUPipeline after PrivatizeLocal, before Flatten) turns
// the accesses of texture parameters (loopir.ScopeTexture) into texel accesses. A load
// becomes the TexRead of its texel (loopir.TexelOf) and lane. A store must sit alone in
// a lane loop, over [0, 4), not bound to a thread axis, storing at lane index the loop
// variable: the loop becomes one TexWrite of the four lanes, so one thread writes a
// whole texel (an image write is a texel). Any other store to a texture is refused
// with ErrTexture and ErrLaunch naming the kernel. A pass that refuses kernels is a
// Pass with Check instead of Run; the pipeline returns its error as it is.
//
// Invariants: passes never change what a PrimFunc computes; each returns a new PrimFunc
// and leaves its input untouched. A pass that meets a construct it cannot handle panics
// with "BUG:" (the compile driver turns that into an error naming the pass).
package passes
