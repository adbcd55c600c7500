package tensor

import (
	"encoding/binary"
	"reflect"
	"unsafe"
)

// hostLittleEndian: the raw encoding (little-endian) is the host's memory layout, so raw
// bytes and numeric slices convert by a plain copy.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// NativeBytes returns the memory of a numeric tensor's data as bytes, without copying,
// when that memory is the raw (little-endian) encoding: on little-endian hosts, for
// every dtype except bool and string. Writes through the slice change the tensor.
func (t *Tensor) NativeBytes() ([]byte, bool) {
	if !hostLittleEndian || t.DType == Bool || t.DType == String {
		return nil, false
	}
	rv := reflect.ValueOf(t.Data)
	if rv.Kind() != reflect.Slice || rv.Len() == 0 {
		return nil, rv.Kind() == reflect.Slice
	}
	switch rv.Type().Elem().Kind() {
	case reflect.Bool, reflect.String, reflect.Interface, reflect.Pointer:
		return nil, false
	}
	n := rv.Len() * int(rv.Type().Elem().Size())
	return unsafe.Slice((*byte)(rv.UnsafePointer()), n), true
}
