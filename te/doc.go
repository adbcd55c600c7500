// Package te declares tensor computations as index expressions, as in TVM's tensor
// expression language: a Placeholder is an input; Compute defines each output element as
// an expression of its indices over other tensors' elements; reductions (Sum, Max, Min,
// Prod) range over reduction axes, and pair reductions (ArgMax, ArgMin) compute a best
// value and its first index in one block. Select, Cast and math intrinsics (Exp, Log,
// Tanh, Erf, Sqrt, Rsqrt, Sigmoid, Pow, Abs, Floor, Ceil, Round) build element
// expressions; CheckedIndex reads an index from data with ONNX's range [-n, n), failing
// the kernel outside it (loopir.IndexCheck). Lower turns a set of outputs into a loopir.PrimFunc: a
// naive loop nest with one Block per computation, which schedules then transform.
//
// Extents may be symbolic (Dim vars); they become the kernel's runtime dims.
//
// Invariants: a Reduce appears only at the top of a compute body; every tensor read in a
// body is an input placeholder or another compute reachable from the outputs.
package te
