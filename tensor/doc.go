// Package tensor holds host tensors: element types (the ONNX set), shapes, and dense
// row-major data in a typed Go slice.
//
// Model: a Tensor is (DType, Shape, Data) where Data is a Go slice whose element type is
// fixed by the DType (see DType.GoType): float32 -> []float32, float16 -> []Float16 (raw
// IEEE half bits), bfloat16 -> []BFloat16, bool -> []bool, string -> []string, and so on.
//
// Sizes from untrusted input (a model, a request, a cache file) are computed with the
// checked helpers (checked.go): CheckedSize and CheckedBytes for element and byte
// counts, CheckedMul and CheckedAdd for other sizes and offsets, SignedMul and SignedAdd
// for signed polynomial arithmetic; a result that does not fit an int64 is ErrTooLarge,
// never a wrapped-around value.
//
// Invariants: len(Data) == Shape.NumElements(); a Shape never holds a negative extent;
// Data is row-major with no padding. Constructors check these and return errors on
// untrusted input; methods that find them broken panic with "BUG:".
//
// References: ONNX IR spec, TensorProto.DataType numbering (the DType values are the same
// numbers so that a decoded data_type maps 1:1).
package tensor
