package modelrepo

import (
	"slices"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// dataTypes is the one table of the element types a tensor may have on the wire: the
// Open Inference Protocol's datatype string, kiln's element type and Triton's config
// data type. The protocol calls variable-length byte strings BYTES where Triton says
// TYPE_STRING. Every lookup below reads this table, so the protocol decoders, the
// responses and config.pbtxt agree on every type.
var dataTypes = [...]struct {
	oip    string
	dtype  tensor.DType
	config modelpb.DataType
}{
	{"BOOL", tensor.Bool, modelpb.DataType_TYPE_BOOL},
	{"UINT8", tensor.Uint8, modelpb.DataType_TYPE_UINT8},
	{"UINT16", tensor.Uint16, modelpb.DataType_TYPE_UINT16},
	{"UINT32", tensor.Uint32, modelpb.DataType_TYPE_UINT32},
	{"UINT64", tensor.Uint64, modelpb.DataType_TYPE_UINT64},
	{"INT8", tensor.Int8, modelpb.DataType_TYPE_INT8},
	{"INT16", tensor.Int16, modelpb.DataType_TYPE_INT16},
	{"INT32", tensor.Int32, modelpb.DataType_TYPE_INT32},
	{"INT64", tensor.Int64, modelpb.DataType_TYPE_INT64},
	{"FP16", tensor.Float16, modelpb.DataType_TYPE_FP16},
	{"FP32", tensor.Float32, modelpb.DataType_TYPE_FP32},
	{"FP64", tensor.Float64, modelpb.DataType_TYPE_FP64},
	{"BYTES", tensor.String, modelpb.DataType_TYPE_STRING},
	{"BF16", tensor.BFloat16, modelpb.DataType_TYPE_BF16},
}

// DataTypeToOIP returns the Open Inference Protocol datatype string ("FP32", "BYTES",
// ...) of a Triton data type; false for TYPE_INVALID and unknown values.
func DataTypeToOIP(t modelpb.DataType) (string, bool) {
	for _, r := range dataTypes {
		if r.config == t {
			return r.oip, true
		}
	}
	return "", false
}

// DataTypeFromOIP returns the Triton data type of an Open Inference Protocol datatype
// string; the match is exact (the protocol's strings are upper case). False, with
// TYPE_INVALID, for any other string.
func DataTypeFromOIP(s string) (modelpb.DataType, bool) {
	for _, r := range dataTypes {
		if r.oip == s {
			return r.config, true
		}
	}
	return modelpb.DataType_TYPE_INVALID, false
}

// DTypeFromOIP returns the element type of an Open Inference Protocol datatype string
// (exact match); false for any other string.
func DTypeFromOIP(s string) (tensor.DType, bool) {
	for _, r := range dataTypes {
		if r.oip == s {
			return r.dtype, true
		}
	}
	return tensor.Undefined, false
}

// DTypeToOIP returns the Open Inference Protocol datatype string of an element type;
// "" for a type the protocol cannot carry (complex numbers).
func DTypeToOIP(dt tensor.DType) string {
	for _, r := range dataTypes {
		if r.dtype == dt {
			return r.oip
		}
	}
	return ""
}

// OIPDatatypes returns every Open Inference Protocol datatype string, sorted.
func OIPDatatypes() []string {
	out := make([]string, len(dataTypes))
	for i, r := range dataTypes {
		out[i] = r.oip
	}
	slices.Sort(out)
	return out
}
