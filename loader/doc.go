// Package loader holds what every model-format decoder shares: the options that bound what
// an untrusted file may make kiln allocate, and the typed errors that callers test with
// errors.Is. Format decoders live below it (loader/onnx).
//
// Invariants: a decoder never panics on bad input; it returns an error wrapping ErrInvalid
// (malformed file) or ErrUnsupported (well-formed but not representable: unknown op,
// domain, opset or attribute), always naming the node, op, domain and opset involved.
package loader

import "errors"

var (
	// ErrInvalid: the file is malformed (bad protobuf, dangling names, inconsistent sizes).
	ErrInvalid = errors.New("invalid model")
	// ErrUnsupported: the file is well-formed but uses something kiln cannot represent.
	ErrUnsupported = errors.New("unsupported model feature")
)

// DefaultMaxTensorBytes bounds any single tensor a file may claim (4 GiB).
const DefaultMaxTensorBytes int64 = 4 << 30

// Options bound and steer decoding.
type Options struct {
	// MaxTensorBytes limits the size of any single tensor; 0 means DefaultMaxTensorBytes.
	MaxTensorBytes int64
}

// Limit returns the effective tensor size limit.
func (o Options) Limit() int64 {
	if o.MaxTensorBytes <= 0 {
		return DefaultMaxTensorBytes
	}
	return o.MaxTensorBytes
}
