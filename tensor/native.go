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

// FromNative wraps raw bytes as a tensor of dt and shape without copying: Data is a
// slice over raw's memory. It applies when NativeBytes would (a little-endian host, a
// dtype other than bool and string), raw holds exactly shape's elements and is aligned
// for the element type, and shape has at least one element; otherwise ok is false and
// the caller copies (FromRaw). The tensor is valid while raw's memory is, and shares it:
// writes through either are visible in the other, and writing read-only memory faults.
func FromNative(dt DType, shape Shape, raw []byte) (*Tensor, bool) {
	if !hostLittleEndian || !dt.Valid() || dt == Bool || dt == String || len(raw) == 0 {
		return nil, false
	}
	n, err := shape.CheckedNumElements(int64(len(raw)))
	if err != nil || n*int64(dt.Size()) != int64(len(raw)) {
		return nil, false
	}
	gt := dt.GoType()
	p := unsafe.Pointer(unsafe.SliceData(raw))
	if uintptr(p)%uintptr(gt.Align()) != 0 {
		return nil, false
	}
	data := reflect.SliceAt(gt, p, int(n)).Interface()
	return &Tensor{DType: dt, Shape: shape.Clone(), Data: data}, true
}
