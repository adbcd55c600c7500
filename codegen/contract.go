package codegen

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Contraction: C, OpenCL C and CUDA compilers may fuse a multiply and the add that
// uses its product into one fused multiply-add, which rounds once where the graph's
// separate nodes round twice. That is as accurate or better everywhere except before
// a rounding to integers (loopir.PrimFunc.NoContract), so a function with NoContract
// prints so that every product rounds on its own: between the dialect's NoContract
// texts where it has them (per function: other functions of the unit keep their
// contraction), through its RoundedMul function otherwise.

// cNoContract brackets a C function: gcc's per-function optimize pragma (every
// function defined in between, the outlined parallel bodies included; the unit's
// always-inline helpers are inlined into them under the function's options) and
// clang's floating-point pragma.
var cNoContract = [2]string{
	"#if defined(__clang__)\n#pragma clang fp contract(off)\n#else\n#pragma GCC push_options\n#pragma GCC optimize (\"fp-contract=off\")\n#endif\n",
	"#if defined(__clang__)\n#pragma clang fp contract(on)\n#else\n#pragma GCC pop_options\n#endif\n",
}

// openCLNoContract brackets an OpenCL C kernel with the standard FP_CONTRACT pragma.
var openCLNoContract = [2]string{"#pragma OPENCL FP_CONTRACT OFF\n", "#pragma OPENCL FP_CONTRACT ON\n"}

// cudaRoundedMul is CUDA's product with its own rounding (round to nearest even),
// which nvcc and NVRTC never contract.
func cudaRoundedMul(dt tensor.DType) string {
	switch dt {
	case tensor.Float32:
		return "__fmul_rn"
	case tensor.Float64:
		return "__dmul_rn"
	}
	return ""
}

// openNoContract writes the text that opens f when f forbids contraction, and returns
// the text that closes it. A dialect that can neither bracket a function nor round a
// product on its own fails the unit: its kernels would not compute what f says.
func (e *cEmitter) openNoContract(f *loopir.PrimFunc) string {
	if !f.NoContract {
		return ""
	}
	if e.d.NoContract[0] != "" {
		e.b.WriteString("\n" + e.d.NoContract[0])
		return e.d.NoContract[1]
	}
	if e.d.RoundedMul == nil {
		e.fail("a function without contraction of multiplies and adds (dialect %s)", e.d.Name)
	}
	return ""
}

// roundedMul prints a float product of a function without contraction in a dialect
// with RoundedMul; ok is false everywhere else (the product prints as usual).
func (e *cEmitter) roundedMul(x *loopir.Binary, a, b string) (string, bool) {
	if x.Op != loopir.Mul || e.f == nil || !e.f.NoContract || e.d.RoundedMul == nil || e.d.NoContract[0] != "" {
		return "", false
	}
	fn := e.d.RoundedMul(x.A.DType())
	if fn == "" {
		return "", false // integers: nothing to contract
	}
	return fn + "(" + a + ", " + b + ")", true
}
