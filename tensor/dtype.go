package tensor

import (
	"fmt"
	"reflect"
	"strings"
)

// DType is an element type. Its numeric value equals ONNX TensorProto.DataType.
type DType int32

const (
	Undefined  DType = 0
	Float32    DType = 1
	Uint8      DType = 2
	Int8       DType = 3
	Uint16     DType = 4
	Int16      DType = 5
	Int32      DType = 6
	Int64      DType = 7
	String     DType = 8
	Bool       DType = 9
	Float16    DType = 10
	Float64    DType = 11
	Uint32     DType = 12
	Uint64     DType = 13
	Complex64  DType = 14
	Complex128 DType = 15
	BFloat16   DType = 16
)

// Float16Bits is an IEEE 754 half-precision value stored as its bits.
type Float16Bits uint16

// BFloat16Bits is a bfloat16 value stored as its bits (the top half of a float32).
type BFloat16Bits uint16

type dtypeInfo struct {
	name  string // short name used in IR text, e.g. "f32"
	onnx  string // ONNX enum name, e.g. "FLOAT"
	size  int    // bytes per element in raw (little-endian) form; 0 for string
	gtype reflect.Type
}

var dtypeTable = map[DType]dtypeInfo{
	Float32:    {"f32", "FLOAT", 4, reflect.TypeFor[float32]()},
	Uint8:      {"u8", "UINT8", 1, reflect.TypeFor[uint8]()},
	Int8:       {"i8", "INT8", 1, reflect.TypeFor[int8]()},
	Uint16:     {"u16", "UINT16", 2, reflect.TypeFor[uint16]()},
	Int16:      {"i16", "INT16", 2, reflect.TypeFor[int16]()},
	Int32:      {"i32", "INT32", 4, reflect.TypeFor[int32]()},
	Int64:      {"i64", "INT64", 8, reflect.TypeFor[int64]()},
	String:     {"str", "STRING", 0, reflect.TypeFor[string]()},
	Bool:       {"bool", "BOOL", 1, reflect.TypeFor[bool]()},
	Float16:    {"f16", "FLOAT16", 2, reflect.TypeFor[Float16Bits]()},
	Float64:    {"f64", "DOUBLE", 8, reflect.TypeFor[float64]()},
	Uint32:     {"u32", "UINT32", 4, reflect.TypeFor[uint32]()},
	Uint64:     {"u64", "UINT64", 8, reflect.TypeFor[uint64]()},
	Complex64:  {"c64", "COMPLEX64", 8, reflect.TypeFor[complex64]()},
	Complex128: {"c128", "COMPLEX128", 16, reflect.TypeFor[complex128]()},
	BFloat16:   {"bf16", "BFLOAT16", 2, reflect.TypeFor[BFloat16Bits]()},
}

// Valid reports whether d is a known element type.
func (d DType) Valid() bool { _, ok := dtypeTable[d]; return ok }

// String returns the short IR name ("f32", "i64", ...).
func (d DType) String() string {
	if i, ok := dtypeTable[d]; ok {
		return i.name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// ONNXName returns the TensorProto.DataType enum name ("FLOAT", "INT64", ...).
func (d DType) ONNXName() string {
	if i, ok := dtypeTable[d]; ok {
		return i.onnx
	}
	return fmt.Sprintf("UNKNOWN(%d)", int32(d))
}

// Size is the number of bytes one element takes in raw little-endian form (0 for string).
func (d DType) Size() int { return dtypeTable[d].size }

// GoType is the Go element type of a tensor's Data slice.
func (d DType) GoType() reflect.Type { return dtypeTable[d].gtype }

// IsFloat reports float16/bfloat16/float32/float64.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// IsInt reports the signed and unsigned integer types.
func (d DType) IsInt() bool { return d.IsSigned() || d.IsUnsigned() }

// IsSigned reports int8..int64.
func (d DType) IsSigned() bool { return d == Int8 || d == Int16 || d == Int32 || d == Int64 }

// IsUnsigned reports uint8..uint64.
func (d DType) IsUnsigned() bool {
	return d == Uint8 || d == Uint16 || d == Uint32 || d == Uint64
}

// IsNumeric reports the types arithmetic is defined on (not bool, string or complex).
func (d DType) IsNumeric() bool { return d.IsFloat() || d.IsInt() }

// ParseDType accepts the short IR name ("f32") or the ONNX enum name ("FLOAT").
func ParseDType(s string) (DType, error) {
	for d, i := range dtypeTable {
		if s == i.name || strings.EqualFold(s, i.onnx) {
			return d, nil
		}
	}
	return Undefined, fmt.Errorf("%w: %q", ErrDType, s)
}
