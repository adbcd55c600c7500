package codegen

import (
	"fmt"
	"strings"

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

// A tensor intrinsic keeps its contraction in a NoContract function: its multiply-adds
// are a reduction's (a micro-kernel's), whose order differs between runtimes anyway and
// which ONNX Runtime's GEMMs and convolutions contract too; what must round per
// operation is the element-wise arithmetic around it (a dequantization's product, a
// bias, the scale before a quantizer). gcc inlines an always-inline intrinsic under
// the calling function's options, so a NoContract function calls the float intrinsic
// through a wrapper that is defined with the unit's own options and not inlined into it
// (a call per tile); clang's and OpenCL's pragmas are lexical and would not need it.

// inlineHeader is how the C implementations of tensor intrinsics open their function.
func inlineHeader(name string) string {
	return "static inline __attribute__((always_inline)) void " + name + "("
}

// intrinName is the function a call to s's intrinsic names: the intrinsic's, or in a
// NoContract function of a dialect with ContractedIntrinsics, for an intrinsic on
// floats, its contracted wrapper (written once per unit).
func (e *cEmitter) intrinName(s *loopir.IntrinCall) string {
	in := s.Intrin
	if e.f == nil || !e.f.NoContract || !e.d.ContractedIntrinsics || !floatOperands(s) {
		return in.Name
	}
	name := in.Name + "_contracted"
	if _, ok := e.intrins.contracted[in.Name]; ok {
		return name
	}
	w, ok := contractedWrapper(in.Name, in.Impl[e.d.Name])
	if !ok {
		return in.Name // an implementation of another form: inlined without contraction
	}
	e.intrins.contracted[in.Name] = w
	return name
}

// floatOperands reports whether a call passes an address of float elements.
func floatOperands(s *loopir.IntrinCall) bool {
	for _, a := range s.Args {
		if ad, ok := a.(*loopir.Address); ok && ad.DType().IsFloat() {
			return true
		}
	}
	return false
}

// contractedWrapper writes NAME_contracted, a function that is never inlined and calls
// NAME with its arguments, from NAME's implementation (its parameter list); ok is false
// when the implementation does not open with inlineHeader.
func contractedWrapper(name, impl string) (string, bool) {
	head := inlineHeader(name)
	i := strings.Index(impl, head)
	if i < 0 {
		return "", false
	}
	rest := impl[i+len(head):]
	j := strings.Index(rest, ")")
	if j < 0 {
		return "", false
	}
	params := rest[:j]
	var args []string
	for _, p := range strings.Split(params, ",") {
		f := strings.FieldsFunc(p, func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '*' })
		if len(f) < 2 {
			return "", false
		}
		args = append(args, f[len(f)-1])
	}
	return fmt.Sprintf("static __attribute__((noinline)) void %s_contracted(%s) {\n  %s(%s);\n}\n", name, params, name, strings.Join(args, ", ")), true
}
