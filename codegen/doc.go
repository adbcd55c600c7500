// Package codegen prints lowered loopir as source code: one emitter, one Dialect per
// language (Emit). A Dialect is a value holding what the C-family languages print
// differently: the unit's prelude (includes or typedefs), the kernel qualifier
// (OpenCL's __kernel, CUDA's __global__), element types, the no-alias pointer
// qualifier, the form of parallel loops (ParallelForm: outlined chunks on host threads
// for C; a GPU dialect maps them to the launch grid), the form of vectorized loops
// (VectorForm: pragma-annotated scalar loops for C; a dialect with vector types prints
// them), the unroll pragma, the names of math functions, and whether float32
// transcendentals use the unit's inline helpers. A tensor intrinsic's implementation is
// looked up under the dialect's name. A dialect whose forms the emitter does not print
// is refused with ErrUnsupported, never printed as C.
//
// A PrimFunc with NoContract prints so that every product rounds before the add that
// uses it (contract.go): between the dialect's NoContract texts (C: gcc's push_options
// and optimize("fp-contract=off") around the function and its outlined bodies, clang's
// fp contract pragma; OpenCL C: FP_CONTRACT OFF and ON), or with products through its
// RoundedMul (CUDA's __fmul_rn). Other functions of the unit keep contraction, and so
// do the float tensor intrinsics such a function calls (C: through a wrapper that is not
// inlined into it, NAME_contracted, since gcc inlines under the caller's options).
//
// CDialect is header-free C (compiler builtins instead of <math.h>,
// typedefs instead of <stdint.h>), because parsing system headers costs more than
// compiling a kernel; EmitC and EmitCWith print through it. Every kernel follows the
// calling convention of package devices: int kernel(void *const *bufs, const long long
// *dims, void *ctx), buffers in parameter order and symbolic dims in PrimFunc.Dims
// order, returning 0 or an error code. A local allocation comes from the heap through
// the runtime's scratch allocator (cScratch: kiln_scratch_alloc, the buffer at a 64-byte
// boundary, so that no 512-bit access of a vector loop splits across cache lines;
// freed at the end of its scope, a block of 32 MiB or more kept for the next launch,
// up to four and 256 MiB per shared object), except one of constant size up to
// maxStackScratch inside a loop: a tile's or a row's scratch allocated per iteration
// (compact_at), which is a 64-byte-aligned array on the stack.
//
// GPU dialects (gpu.go, dialect_gpu.go): CUDADialect (CUDA C++ for NVRTC) and
// OpenCLDialect (OpenCL C 1.2) print through the same emitter; their ParallelForm is
// LaunchGrid, which switches the kernel's frame to the GPU calling convention of the
// devices (devices/cuda's doc): `extern "C" __global__ void name(T *b0, ..., long long
// d0, ..., long long *status)`, in OpenCL `__kernel void name(__global T *b0, ..., long
// d0, ..., __global long *status)`: buffers (inputs, then outputs), each runtime dim by
// value, the status block last. A loop bound to a thread axis (loopir.Bound) prints as
// its launch index (blockIdx.x / get_group_id(0), threadIdx.x / get_local_id(0)), so a
// kernel is correct when launched with the geometry loopir/passes.DeriveLaunch gives,
// which also guards tails. Everything else (expressions, floor division helpers,
// min/max/select helpers, tensor intrinsics under the dialect's name) is the shared
// printer with the dialect's types, helper qualifier, literal suffix and math names.
// An index check prints as kiln_index(v, n, kiln_status): an index outside [-n, n)
// claims the status block with a compare-and-swap of its code from 0
// (StatusIndexOutOfRange; CUDA's 64-bit atomicCAS, OpenCL C 1.1's 32-bit
// atomic_cmpxchg on the code's first half, as devices/opencl documents), so the first
// failing thread's index and n become the details, and reads a clamped index. The GPU
// path does not print parallel loops, bounds checks, or local and shared buffers of
// run-time size (ErrUnsupported); a local buffer of constant size is a private array, a
// shared buffer (loopir.ScopeShared) an array of the block declared at kernel scope with
// the dialect's SharedQualifier (__shared__, __local: OpenCL C allows __local variables
// only there), a loopir.Barrier the dialect's Barrier statement (__syncthreads(),
// barrier(CLK_LOCAL_MEM_FENCE)), and a vectorized loop a plain loop (ScalarLoops). The
// C dialect prints a shared buffer as any allocation and refuses barriers. CUDA math is the accurate library
// (expf, not __expf); OpenCL math is the overloaded built-ins, float32 only.
//
// Images: a texture parameter (loopir.ScopeTexture, after loopir/passes.FlattenTextures)
// prints in the dialect's ImageForm. OpenCL C: `__read_only image2d_t`, or
// `__write_only image2d_t` when the kernel writes it (a kernel that both reads and
// writes one image is refused); a kernel that reads images declares the sampler
// kiln_smp (unnormalized coordinates, no addressing, nearest: a texel's exact value);
// a TexRead is read_imagef(img, kiln_smp, (int2)(x, y)) with the lane selected by .s0 to
// .s3, or by the unit's kiln_lane helper when the lane is known only at run time; a
// TexWrite is write_imagef(img, (int2)(x, y), (float4)(v0, v1, v2, v3)). CUDA and C have
// no ImageForm: texture parameters, and element accesses of a texture (the pass did not
// run), are ErrUnsupported.
//
// Math: float32 exp, log, tanh, sigmoid and erf are not C library calls but static inline
// (always_inline) functions defined in the unit's prelude, only those its kernels call
// (c_math.go), so that gcc and clang inline them and vectorize the loops that call them:
// elementwise epilogues such as GELU's erf and softmax's exp run 8 lanes at a time on
// AVX2. They are branch-free (special cases and pieces are selects, 2^n is built from
// exponent bits through a union) and their polynomials are minimax fits computed for
// kiln (Remez exchange in float64, coefficients rounded to float32):
//   - exp: n = round(x/ln2), Cody-Waite r = x - n ln2, w = e^r - 1 = r + r^2 P4(r)
//     (kiln_expm1_reduced, shared with sigmoid: P4 as a linear plus r^2 times a
//     quadratic, two short chains), 2^n e^r as s1 w + s1 times s2 with s1 s2 =
//     2^(n>>1) 2^(n-(n>>1)) so the scaling rounds once at overflow (+inf above 88.72) and
//     in the subnormals; -inf and x < -104 give 0, NaN stays NaN.
//   - log: exponent and mantissa m in [sqrt(1/2), sqrt(2)) from the bits (subnormals
//     scaled by 2^23), log1p(m-1) = f + f^2 P8(f); log 0 = -inf, negatives and NaN NaN.
//   - tanh: |x| < 0.625 x + x^3 P4(x^2), else 1 - 2/(e^2|x| + 1), with x's sign.
//   - sigmoid: 2^-64 / (s w + (s + 2^-64)) with s = 2^(n-64), n = round(-x/ln2) and
//     w = e^r - 1 from the same reduction and polynomial: E = e^-x 2^-64 stays normal
//     for x in [-104, 20], so there is no |x| and no select on the sign, the quotient
//     rounds once (subnormal results included) and the tails keep their relative
//     accuracy. x is clamped above at 20 (the result is 1 from 16.7 on) and n capped at
//     150 by an integer min on the shifter's bits: below -104 every term of w is positive
//     and the quotient is 0. The SiLU epilogues of the convolutions (x sigmoid(x)) spend
//     most of their time here: against an |x|-and-select form gcc 12 emits 5 vector
//     instructions fewer per 8 lanes, 18-22% less CPU time per element (clang 15: 7-10%;
//     AVX2, Zen 3).
//   - erf: |x| < 1 x P6(x^2), else sign(x) Q12(|x|-2.5), Q12 a polynomial fitted to
//     erf itself on [1, 3.92] (absolute error, Lawson-weighted least squares; no exp:
//     the former 1 - e^(Q8(|x|-2.5) - x^2) cost GELU's epilogue 1.10 ns per element
//     against 0.61 now, a 4096-element loop with the device's flags, Emerald Rapids),
//     capped at 1; |x| clamped to 3.92, from where the result is 1 (erf rounds to 1).
//
// Measured against float64 libm, compiled with the CPU device's flags, over every
// float32 input: log 0.92 ulp, erf 1.37e-7 absolute (2.47 ulp below |x| = 1; the
// polynomial above 1: 9.2e-8, with FMA); over
// every third float32 bit pattern: exp 1.04 ulp, tanh 1.33 ulp, sigmoid 2.44 ulp (at a
// binade edge of the result near x = -16.64); special values (±0, ±inf, NaN, overflow,
// underflow) are exact. TestMathHelpersAccuracy checks a sweep of the whole range,
// TestMathHelpersAccuracyWithoutContraction the same bounds with every product rounded
// (loopir.PrimFunc.NoContract, or a target without FMA), and TestMathHelpersVectorize
// that the compiler vectorizes a loop of each. float64 math and
// the other intrinsics (sqrt, pow, sin, asin … atanh, fmod, ...) call the compiler's
// builtins (a GPU dialect: the language's functions of the same names).
//
// Shifts (loopir.Shl, Shr) work on the unsigned representation and are guarded by a
// conditional expression, so a count outside [0, width) gives 0 without C's undefined
// shift (c_shift.go). Bitwise operators (loopir.BitAnd, BitOr, BitXor) print as C's &, |
// and ^ in every dialect: on two operands of one integer type C's promotion keeps the
// value within that type, so no cast follows (a complement is x ^ the type's all-ones
// value, 255 for uint8, never -1). Half floats (HalfBits, the C dialect): float16 and bfloat16
// elements are u16 bits that kernels load, store and select; a Cast between them and
// float32 calls a conversion helper bit-exact with package tensor (round to nearest
// even), and any other operation on them (arithmetic, a literal, a math call, another
// cast) is ErrUnsupported (c_half.go).
//
// Integer / and % of loopir are floor operations: they print as C's own where the
// dividend cannot be negative and the divisor is positive (a constant, or a dim that is a
// factor of an enclosing loop's extent, so at least 1 wherever the body runs: the
// indices of a fused or split symbolic loop), and through kiln_floordiv/kiln_floormod
// otherwise (whose branches the C compiler neither hoists nor vectorizes around: through
// them a symbolic kernel's indices cost up to 100× in time).
//
// Vectorized loops print with `#pragma omp simd` (compiled with -fopenmp-simd, no
// OpenMP runtime; schedule's vectorize admits only innermost loops whose iterations
// write distinct elements, which is what the pragma asserts), except a vectorized
// reduction (its body one loopir.Accumulate into an element invariant in the loop, as
// schedule's vectorize admits): the element is held in a scalar accumulator and the loop
// carries `#pragma omp simd reduction(op:acc)`, so a row's sum or max runs across vector
// lanes instead of one serial chain of additions (softmax 4-5× and LayerNorm 2-3×
// faster on bert_tiny). Not `#pragma GCC ivdep`: under it gcc unrolls a short constant
// loop (a block's 16 or 32 channel lanes) completely before vectorizing, and then
// leaves the lanes scalar (a blocked global average pool about 5× slower) or vectorizes
// the loop around them with permutes (a blocked convolution's bias pass over 112×16
// floats per row: mobilenet_v2's 32→16 projection 0.15 against 0.09 ms in a C harness).
// gcc sizes a vectorized loop's vectors by the narrowest type in it, so 8- and 16-bit
// values are kept out of loops of wider arithmetic (c_hoist.go): a widening cast of a
// loop-invariant narrow load (a quantizer's zero point) prints before the loop as a
// constant of the wide type, and a loop of a few lanes that reads or stores narrow
// values per lane (a channel block of a quantized convolution's epilogue) prints as a
// widening loop, the arithmetic in wide types only, and a narrowing store loop.
//
// Tensor intrinsics are defined once per translation unit from their implementation in
// the dialect's language ("c" for CDialect)
// and called with element addresses, strides and extents. Parallel loops are outlined
// into functions over chunks of the iteration space and run by a small thread pool
// emitted into the unit (persistent workers that spin between regions and then sleep on a
// futex, woken by a system call only when one sleeps; chunks claimed dynamically, each
// thread from its own contiguous range of the loop first, then from the others'; a
// busy pool means the caller runs its chunks itself; kiln_pool_shutdown stops the workers
// before the object is unloaded) or, for comparison, OpenMP or a pthread fork-join
// (COptions). A parallel loop whose whole work is known at compile time to be under
// about 32k element operations (stores and intrinsic tiles under constant loops,
// iterationWork) runs on the calling thread: waking a worker would cost more than it
// saves. With COptions.ExternRuntime a unit only declares the pool, and CRuntime is
// compiled once into an object that the kernels' objects are linked with
// (docs/ARCHITECTURE.md, "The pipeline", phase 7: one object per kernel, one shared
// object per model).
//
// Index checks: a loopir.IndexCheck prints as kiln_index(v, n, &oob), a helper emitted
// only into units that call it: it wraps a negative index and, when the index is outside
// [-n, n), records the first one (per kernel, or per parallel chunk, merged at the join)
// and returns a clamped index. A check that does not depend on a loop (no variable bound
// in it, no buffer it writes) is printed once before it as a constant, so a gather's
// row loop stays a vector loop. A kernel with checks returns StatusIndexOutOfRange when
// it has finished, with the index and n in the words 1 and 2 of its context
// (devices.KernelError's Detail).
//
// Bounds checks (COptions.BoundsCheck, a debug build; the default build has none and
// prints exactly as without the option): every load and store checks its flat element
// offset against the extent of its buffer (a parameter's declared shape, symbolic
// extents from the run-time dims; a local allocation's size). A load goes through
// kiln_ld_<type> (an offset outside reads 0) and a store through kiln_st_<type> (one
// outside is dropped), both recording the first failure (per kernel, or per parallel
// chunk, merged at the join), so a failing kernel touches no memory it does not own. A
// loop's loads and stores that run on every iteration with an offset affine in the
// loop variable (a constant coefficient, the rest invariant in the loop) are checked as
// whole ranges before the loop, at its first and last iteration, and print unchecked
// inside it: a vector loop checks whole vectors and stays a vector loop, an unrolled
// micro-kernel stays straight-line code (resnet18's checked build measured 1.2-1.4×
// the default build's latency on 2 threads, against 1.5× with checks on every element
// outside vector loops; bert_tiny's the same as default); the loop is skipped when a
// range fails. A tensor intrinsic call checks each tile it is passed: from the tile's address,
// each loop's stride times its extent - 1, for the extents of the call. The kernel then
// returns StatusOutOfBounds with the buffer's number (parameters in order, then local
// allocations in order of appearance) and the offset in the words 1 and 2 of its context.
//
// Invariants: identifiers are sanitized and unique within a kernel; output is
// deterministic (golden-file tests compare it byte for byte); a construct the dialect
// cannot express is an error naming the kernel, never silently dropped code.
package codegen
