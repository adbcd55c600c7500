// Package loopir is the loop-level IR of the tensor compiler: a PrimFunc is a loop nest
// over Buffers, made of For loops, Blocks (one per computation, with spatial and
// reduction iterators bound to loop expressions, read/write regions and an optional init
// statement), Stores, IfThenElse, Allocate and IntrinCalls of declared tensor intrinsics
// (TensorIntrin: a description PrimFunc plus per-dialect code, see package intrin).
// Expressions are immutable trees over Vars, immediates, arithmetic (integer / and %
// floor; << and >> logical, a count outside [0, width) giving 0), comparisons,
// Select, Cast, math intrinsic Calls, the IndexCheck of an index read from data (an
// error the kernel reports, with a clamped value), buffer Loads and element Addresses
// (intrinsic arguments). Buffers are row-major unless they carry explicit Strides; loops may carry
// Annotations for passes and dialects.
//
// GPU launches: a loop may be bound to a ThreadAxis (blockIdx.x/y/z, threadIdx.x/y/z):
// its kind is Bound(axis), printed "bind(threadIdx.x)", and its iterations run as that
// index of a launch, one per block or thread, instead of in turn. The binding is a kind
// rather than an annotation so that every pass that rebuilds a loop keeps it. Launch
// is the geometry such a kernel runs with: grid and block extents per dimension as
// expressions over the runtime dims (loopir/passes derives it).
//
// Memory scopes (Buffer.Scope): parameters are global; an allocation is local (private
// to the thread that runs it: registers on a GPU) or shared (one buffer per GPU block,
// visible to its threads: CUDA __shared__, OpenCL __local). A Barrier statement is a
// work-group barrier over shared memory: every thread of the block waits there for the
// others, and the shared writes before it are visible after it. It prints as "barrier".
//
// Textures (ScopeTexture): a kernel parameter may live in an RGBA float32 image2d: a
// 5-D float32 buffer whose last axis is the four lanes of a texel and whose Packing
// maps the other four indices to the texel (x, y) (TexelOf; the packings mirror
// graph's NCHW4c, OIHW4o and NHWC4c). Schedules index it as any buffer; loopir/passes
// then turns its loads into TexRead (a texel's four lanes, one selected) and a lane
// loop of stores into one TexWrite (the four lanes of one texel, written by one
// thread), printed "texread(x, px, py)[lane]" and "texwrite(y, px, py) = [v0, v1, v2,
// v3]". A kernel reads a texture or writes it, never both.
//
// Symbolic extents are Vars listed in PrimFunc.Dims: at run time their values arrive in
// the kernel's dims array, in that order, so one kernel serves many shapes.
//
// Invariants (Verify): every Var used is bound (a loop var, a block iterator, or a dim);
// every buffer accessed is a parameter or allocated in scope; index counts match buffer
// ranks; each thread axis is bound by at most one loop of a function, and a function
// with bound loops has no parallel (host thread) loops; allocations are local or shared,
// a shared one never under a loop bound to a threadIdx axis; a barrier is outside blocks
// and vector or parallel loops, and under no condition or loop bound that depends on a
// threadIdx loop (every thread of a block reaches the same barriers); texture
// parameters are valid (float32, five axes, a lane axis of 4, no strides), indexed
// with all five indices, never both read and written, and texel accesses name one.
// The package knows no devices and no languages: codegen prints it.
//
// Simplification (Analyzer): integer index arithmetic from variable ranges (canonical
// sums, floor division and modulo rules, comparisons and clamps the bounds decide), and
// conversions of a float through a narrow integer that a clamp and a rounding prove to
// be identities — a dequantization reading a quantization inline becomes float
// arithmetic (simplify_cast.go; NaN aside, which C leaves undefined there).
//
// References: TVM TensorIR (blocks, iterator bindings, schedules as transformations).
package loopir
