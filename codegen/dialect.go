package codegen

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Dialect is what one C-family language prints differently. The emitter walks the loop
// IR once, the same for every language, and asks the dialect at each point where the
// languages part: the unit's prelude, the kernel's qualifiers, element types, pointer
// qualifiers, the form of parallel and vectorized loops, and the names of math
// functions. A language is one Dialect value (CDialect, CUDADialect, OpenCLDialect); a form of loop
// the emitter does not print for a dialect is an error wrapping ErrUnsupported, never
// silently different code.
type Dialect struct {
	// Name is Source.Lang and the key of a tensor intrinsic's implementation
	// (loopir.TensorIntrin.Impl) in this language.
	Name string
	// Prelude opens every translation unit: includes or typedefs, and the helpers any
	// kernel may call.
	Prelude string
	// KernelQualifier precedes a kernel's definition (C: none; OpenCL C "__kernel",
	// CUDA C `extern "C" __global__`).
	KernelQualifier string
	// Restrict qualifies a pointer that no other pointer of the kernel aliases.
	Restrict string
	// Types are the element types by dtype; a dtype without one is ErrUnsupported.
	Types map[tensor.DType]string
	// HalfBits: float16 and bfloat16 elements are their 16 bits (Types maps both to an
	// unsigned 16-bit type). Loads, stores and selects move the bits, a Cast between
	// them and float32 converts through the unit's helpers (c_half.go), and any other
	// operation on them is ErrUnsupported.
	HalfBits bool
	// Parallel is how a parallel loop runs.
	Parallel ParallelForm
	// Vector is how a vectorized loop prints.
	Vector VectorForm
	// UnrollPragma is the pragma before a loop the schedule unrolled (the C compiler
	// unrolls it).
	UnrollPragma string
	// Math names the function computing the C99 math function base (exp, log, sqrt,
	// fabs, floor, pow, inf, nan, ...) on dt (float32 or float64).
	Math func(base string, dt tensor.DType) string
	// InlineMathF32: float32 exp, log, tanh, sigmoid and erf call the branch-free
	// helpers defined in the unit (c_math.go) instead of Math's functions.
	InlineMathF32 bool
	// HelperQualifier precedes the definitions of the unit's small helper functions
	// (min, max, select): "static inline", or CUDA's device-function form.
	HelperQualifier string
	// Int64Suffix ends an int64 literal ("LL" in C and CUDA C, "L" in OpenCL C).
	Int64Suffix string
	// ThreadIndex is the expression of a launch index (LaunchGrid dialects).
	ThreadIndex func(loopir.ThreadAxis) string
	// IndexHelper defines kiln_index(v, n, where), the check of a loopir.IndexCheck,
	// in this language; where is the kernel's record of a bad index (C: a local struct;
	// GPU: the status block). Empty: index checks are ErrUnsupported.
	IndexHelper string
	// GlobalQualifier is the address space of a kernel's buffer parameters (OpenCL's
	// "__global"; none elsewhere).
	GlobalQualifier string
	// ByteOffsets passes each buffer parameter of a GPU kernel as its buffer and a byte
	// offset into it (two parameters: `__global char *kiln_base_x, long kiln_off_x`,
	// and x declared from them at the top of the body), so that a device places a
	// tensor inside a larger buffer without a sub-buffer object (OpenCL: drivers differ
	// in how they keep sub-buffers; NVIDIA's crashed releasing one).
	ByteOffsets bool
	// SharedQualifier declares a shared buffer (loopir.ScopeShared), one per block, at
	// kernel scope (CUDA "__shared__", OpenCL "__local"). Empty: the dialect prints a
	// shared buffer as any other allocation (C: the emulation of a launch on the CPU).
	SharedQualifier string
	// Barrier is the statement of a loopir.Barrier (CUDA "__syncthreads();", OpenCL
	// "barrier(CLK_LOCAL_MEM_FENCE);"). Empty: barriers are ErrUnsupported.
	Barrier string
	// Images prints texture parameters as images (OpenCL's image2d_t). Nil: texture
	// parameters, texel reads and texel writes are ErrUnsupported.
	Images *ImageForm
	// NoContract is the text before and after a function whose loopir.PrimFunc
	// NoContract is set: it turns off the compiler's contraction of a multiply and an
	// add into a fused multiply-add for that function (contract.go). Empty: RoundedMul.
	NoContract [2]string
	// ContractedIntrinsics: a NoContract function calls a float tensor intrinsic
	// through an out-of-line wrapper compiled with contraction (contract.go): the C
	// compiler applies a function's options to what it inlines into it, which would
	// take the fused multiply-adds out of the micro-kernels.
	ContractedIntrinsics bool
	// RoundedMul names the function multiplying two floats of dt with the product
	// rounded on its own, which the compiler never contracts (CUDA's __fmul_rn); a
	// dialect with neither fails a NoContract function.
	RoundedMul func(dt tensor.DType) string
}

// ParallelForm is how a dialect runs a parallel loop.
type ParallelForm uint8

const (
	// OutlinedChunks: the loop body becomes a function over a chunk of the iteration
	// space, and the kernel runs the chunks on host threads (COptions.Parallel picks the
	// thread runtime).
	OutlinedChunks ParallelForm = iota
	// LaunchGrid: the kernel is one GPU launch. Loops bound to thread axes
	// (loopir.Bound) print as the launch indices, the kernel follows the GPU calling
	// convention (buffers, dims by value, the status block; gpu.go), and a parallel loop
	// is refused: a GPU schedule binds its loops instead.
	LaunchGrid
)

func (p ParallelForm) String() string {
	switch p {
	case OutlinedChunks:
		return "outlined-chunks"
	case LaunchGrid:
		return "launch-grid"
	}
	return fmt.Sprintf("parallel-form(%d)", uint8(p))
}

// VectorForm is how a dialect prints a vectorized loop.
type VectorForm uint8

const (
	// PragmaLoops: a scalar loop the C compiler vectorizes, told so by a pragma
	// (`#pragma omp simd`; a reduction into one element `#pragma omp simd reduction`).
	// A dialect with vector types (OpenCL's float4) prints them through a form of its
	// own.
	PragmaLoops VectorForm = iota
	// ScalarLoops: a vectorized loop prints as a plain loop (a GPU thread is scalar;
	// the lanes are the threads).
	ScalarLoops
)

func (v VectorForm) String() string {
	switch v {
	case PragmaLoops:
		return "pragma-loops"
	case ScalarLoops:
		return "scalar-loops"
	}
	return fmt.Sprintf("vector-form(%d)", uint8(v))
}

// CDialect is header-free C for the CPU: the calling convention of package devices,
// C compiler builtins for math, host threads for parallel loops and the C compiler's
// vectorizer for vector loops.
func CDialect() *Dialect {
	return &Dialect{
		Name:     "c",
		Prelude:  cPrelude,
		Restrict: "restrict",
		Types: map[tensor.DType]string{
			tensor.Float32: "float", tensor.Float64: "double",
			tensor.Int64: "i64", tensor.Int32: "i32", tensor.Int16: "i16", tensor.Int8: "i8",
			tensor.Uint64: "u64", tensor.Uint32: "u32", tensor.Uint16: "u16", tensor.Uint8: "u8",
			tensor.Bool: "u8", tensor.Float16: "u16", tensor.BFloat16: "u16",
		},
		HalfBits:        true,
		Parallel:        OutlinedChunks,
		Vector:          PragmaLoops,
		UnrollPragma:    "GCC unroll 16",
		Math:            cBuiltinMath,
		InlineMathF32:   true,
		HelperQualifier: "static inline",
		Int64Suffix:     "LL",
		IndexHelper:     cIndexCheck,
		NoContract:      cNoContract,

		ContractedIntrinsics: true,
	}
}

// cBuiltinMath names the C compiler's builtin: __builtin_expf for float32,
// __builtin_exp for float64.
func cBuiltinMath(base string, dt tensor.DType) string {
	if dt == tensor.Float64 {
		return "__builtin_" + base
	}
	return "__builtin_" + base + "f"
}

// mathBase is the C99 base name of each loop-IR math intrinsic.
var mathBase = map[loopir.Intrinsic]string{
	loopir.Exp: "exp", loopir.Log: "log", loopir.Sqrt: "sqrt", loopir.Tanh: "tanh", loopir.Erf: "erf",
	loopir.Pow: "pow", loopir.Abs: "fabs", loopir.Floor: "floor", loopir.Ceil: "ceil", loopir.Round: "rint",
	loopir.Sin: "sin", loopir.Cos: "cos", loopir.Asin: "asin", loopir.Acos: "acos", loopir.Atan: "atan",
	loopir.Asinh: "asinh", loopir.Acosh: "acosh", loopir.Atanh: "atanh", loopir.Fmod: "fmod",
}
