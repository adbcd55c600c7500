// Package codegen prints lowered loopir as source code: one emitter, one Dialect per
// language. The C dialect comes first: header-free C (compiler builtins instead of
// <math.h>, typedefs instead of <stdint.h>), because parsing system headers costs more
// than compiling a kernel. Every kernel follows the calling convention of package
// devices: int kernel(void *const *bufs, const long long *dims, void *ctx), buffers in
// parameter order and symbolic dims in PrimFunc.Dims order, returning 0 or an error code.
//
// Tensor intrinsics are defined once per translation unit from their "c" implementation
// and called with element addresses, strides and extents. Parallel loops are outlined
// into functions over chunks of the iteration space and run by a small thread pool
// emitted into the unit (persistent workers, futex sleep, chunks claimed dynamically, a
// busy pool means the caller runs its chunks itself; kiln_pool_shutdown stops the workers
// before the object is unloaded) or, for comparison, OpenMP or a pthread fork-join
// (COptions). With COptions.ExternRuntime a unit only declares the pool, and CRuntime is
// compiled once into an object that the kernels' objects are linked with
// (ARCHITECTURE.md §6: one object per kernel, one shared object per model).
//
// Invariants: identifiers are sanitized and unique within a kernel; output is
// deterministic (golden-file tests compare it byte for byte); a construct the dialect
// cannot express is an error naming the kernel, never silently dropped code.
package codegen
