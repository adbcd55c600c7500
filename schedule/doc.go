// Package schedule transforms a PrimFunc's loop nest without changing what it computes:
// TVM's TensorIR primitives applied to a concrete function. Loops and blocks are named by
// random variables (LoopRV, BlockRV) that stay valid across transformations.
//
// Primitives: get_block, get_loops; loop transformations split (inexact splits add a
// block predicate), fuse, reorder, parallel, vectorize, unroll, annotate; bind (a loop
// runs as a GPU thread axis, blockIdx.x/y/z or threadIdx.x/y/z: serial, starting at 0,
// driving no reduction, one loop per axis, no host-parallel loop in the same function,
// a grid extent over the runtime dims only, a block extent with a constant upper bound;
// split and fuse refuse a bound loop, so bind comes last); block placement
// compute_inline, reverse_compute_inline, compute_at and reverse_compute_at
// (the moved block covers the region its consumers read, or its producer wrote, under
// the target loop; reverse_compute_at takes a consumer that reads its input at its own
// iterators in another order, a layout change, and covers the permuted region; per-axis bounds from affine indices with constant coefficients;
// compute_at moves a reduction, which reads its own accumulator, and an arg-reduction,
// which stores an index and a value at the same point, and allocates a local buffer
// whose every access is then under the loop there, shrunk to the region and indexed
// relative to it: under a loop bound to threadIdx, each thread's own storage);
// compact_at (a local buffer whose every access is under a loop, its stores there
// covering their region densely, is allocated in that loop over just the region: a
// consumer moved under the loop by reverse_compute_at then reads a tile-sized
// temporary instead of a whole-tensor one); cache_read and cache_write (a copy in a
// buffer of scope local or shared);
// decompose_reduction; add_unit_loop (a loop of one iteration around a block, so that
// a block without loops can be bound); storage_align (padded strides of a local
// buffer); tensorize (a perfect nest matched structurally against a loopir.TensorIntrin
// description, strides taken from the actual buffers, split tails turned into run-time
// extents); all_reduce (below). Queries (Extent, HasBlock, BlockName) are not
// recorded. vectorize takes a spatial innermost loop, or an innermost reduction loop
// over one decomposed block that accumulates a sum, max or min into an element the loop
// does not move (loopir.MatchAccumulate): that grants reassociation, which the code
// generator uses for a vector reduction; any other reduction loop is refused.
//
// GPU memory: under a loop bound to a threadIdx axis (a kernel's per-thread part),
// reverse_compute_at also allocates the local buffer it reads there, shrunk to the
// region written under the loop: one register tile per thread (the writes a thread
// copies back must cover their region densely, so it never copies an element another
// thread owns). A shared buffer (cache_read(b, i, "shared") then compute_at under the
// thread loops) stays one per block, shrunk where it is allocated to what all the
// block's threads read under the loop (the thread loops vary too, and the region's
// start must not depend on them), and its producer becomes a cooperative copy: the
// region's elements in rounds of one element per thread of the block, thread t taking
// element round·threads + t, t linear over the thread loops with x fastest
// (consecutive threads read consecutive elements). The copy's inner split part is thus
// the block's thread axes themselves, which bind it. The barriers between the copy and
// its readers, and before the next round overwrites it, are inserted by
// loopir/passes.InsertBarriers.
//
// Block-wide reductions: all_reduce(b, l, threads) takes a reduction block b that every
// thread of loop l (bound to a threadIdx axis, the only one) computes alike into storage
// of its own (compute_at placed it under l: a row's statistic each thread needs), and
// makes the block's threads share it, TVM's rfactor plus cross-thread all-reduce in one
// step: thread t combines the elements t, t + threads, … of the reduction loops' domain
// (flattened row-major, so consecutive threads read consecutive elements; a partial
// round is a predicate) into a private partial, the partials go to a shared buffer of
// threads elements, a tree of log2(threads) levels combines them (level s: threads
// t < s combine element t + s into t), and the result, combined with b's init value, is
// written back by every thread into its local buffer, or by thread 0 into a buffer that
// is not local. Each stage is a block (<b>_part_init, <b>_part, <b>_lanes, <b>_tree<s>,
// and b itself as the write-back), so the function stays verifiable and lowers as any
// other; loopir/passes.InsertBarriers puts a barrier after the partials, after each
// level and before the write-back. A thread loop of fewer than threads iterations (one
// output element per block: add_unit_loop's loop) is widened to threads, the blocks under
// it that are not lane-private and lane-independent keeping to its former iterations.
// An arg-reduction (te's value and index pair) carries its index through the partials
// and the tree in a second shared buffer, the tree breaking ties by the smaller index
// as the scan keeps the first; each of its levels is two blocks, the index's and the
// value's, with a barrier between them. Preconditions: threads a power of two of at
// least 2; an update by +, ·, max or min of one element (associative and commutative:
// the regrouping changes a float sum's rounding), or an arg-reduction; no condition between
// l and b; spatial loops, then a perfect nest of b's reduction loops with bounds
// independent of each other; nothing of b (bindings, predicate, the local buffers it
// reads and their writers, transitively) depends on l.
//
// Every applied primitive is appended to a Trace (instruction, inputs, integer
// decisions, outputs). A trace prints as text, parses back, and replays on a fresh copy of
// the same PrimFunc to the identical result: it is the description of a default
// schedule and the form a tuning record would take (no tuner is built).
//
// compute_inline and reverse_compute_inline refuse to copy an expression read more than
// once when the copies would pass maxInlineCopy (1024) nodes: each such inline doubles
// the expression at least, so a chain of them (x·x, ops reading their input twice) would
// grow it exponentially. The producer then keeps its own buffer.
//
// Invariants: each primitive checks its preconditions and returns an error (wrapping
// ErrSchedule) instead of producing wrong code; on error the schedule is unchanged.
//
// References: TVM TensorIR schedule primitives and trace (Feng et al., "TensorIR", 2023).
package schedule
