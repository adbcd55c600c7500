package configs

import "github.com/kilnrt/kiln/configs/modelpb"

// oipNames maps Triton's data types to the Open Inference Protocol's datatype strings.
// The protocol calls variable-length byte strings BYTES where Triton says TYPE_STRING.
var oipNames = map[modelpb.DataType]string{
	modelpb.DataType_TYPE_BOOL:   "BOOL",
	modelpb.DataType_TYPE_UINT8:  "UINT8",
	modelpb.DataType_TYPE_UINT16: "UINT16",
	modelpb.DataType_TYPE_UINT32: "UINT32",
	modelpb.DataType_TYPE_UINT64: "UINT64",
	modelpb.DataType_TYPE_INT8:   "INT8",
	modelpb.DataType_TYPE_INT16:  "INT16",
	modelpb.DataType_TYPE_INT32:  "INT32",
	modelpb.DataType_TYPE_INT64:  "INT64",
	modelpb.DataType_TYPE_FP16:   "FP16",
	modelpb.DataType_TYPE_FP32:   "FP32",
	modelpb.DataType_TYPE_FP64:   "FP64",
	modelpb.DataType_TYPE_STRING: "BYTES",
	modelpb.DataType_TYPE_BF16:   "BF16",
}

// DataTypeToOIP returns the Open Inference Protocol datatype string ("FP32", "BYTES",
// ...) of a Triton data type; false for TYPE_INVALID and unknown values.
func DataTypeToOIP(t modelpb.DataType) (string, bool) {
	s, ok := oipNames[t]
	return s, ok
}

// DataTypeFromOIP returns the Triton data type of an Open Inference Protocol datatype
// string; the match is exact (the protocol's strings are upper case). False, with
// TYPE_INVALID, for any other string.
func DataTypeFromOIP(s string) (modelpb.DataType, bool) {
	for t, name := range oipNames {
		if name == s {
			return t, true
		}
	}
	return modelpb.DataType_TYPE_INVALID, false
}
