package serve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/tensor"
)

// Error classes; every error the Service returns wraps one, and the protocol layers map
// them to status codes (HTTP 400/404/503/500, gRPC INVALID_ARGUMENT/NOT_FOUND/...).
var (
	ErrInvalid     = errors.New("invalid request")   // the request is wrong: 400
	ErrNotFound    = errors.New("not found")         // unknown model, version or input: 404
	ErrUnavailable = errors.New("unavailable")       // not ready, failed to load, shutting down: 503
	ErrInternal    = errors.New("internal error")    // a bug or a failed kernel: 500
	ErrDisabled    = errors.New("not enabled")       // an API switched off (repository control): 403
	ErrDeadline    = errors.New("deadline exceeded") // the request's deadline passed: 504
)

// Tensor is a named tensor of a request or response; Datatype is the Open Inference
// Protocol name ("FP32", "INT64", "BYTES", ...).
type Tensor struct {
	Name     string
	Datatype string
	Shape    []int64
	Data     *tensor.Tensor
	// SharedMemory, on a request's input, is where its data is (Data is nil); on a
	// response's output, where its data was written (the protocols send no data).
	SharedMemory *SharedMemoryRef
}

// RequestedOutput names an output to return; Params carries protocol parameters (e.g.
// binary_data) through to the encoder.
type RequestedOutput struct {
	Name   string
	Params map[string]any
	// SharedMemory is where to write the output instead of returning its data.
	SharedMemory *SharedMemoryRef
}

// InferRequest is one inference, already decoded from its protocol.
type InferRequest struct {
	Model, Version, ID string
	Inputs             []Tensor
	Outputs            []RequestedOutput // empty: every output
	Params             map[string]any
}

// InferResponse is the result of an inference. Device names the device of the
// instance that ran it ("cpu", "opencl:0"), for the protocols' request logs; it is not
// part of the protocol's response.
type InferResponse struct {
	Model, Version, ID string
	Outputs            []Tensor
	Device             string
	// CompileWait is how long the request waited for its executable to compile (its
	// own compile, a load at start, or another request's); 0: it was loaded already.
	CompileWait time.Duration
	timing      requestTiming // for the statistics
}

// ComputeTime is how long the request's execution ran on its device: the same span
// as the statistics' compute_infer (a batch's execution, for a batched request).
func (r *InferResponse) ComputeTime() time.Duration { return r.timing.compute }

// CompileWaitHeader is the response header (REST) or header metadata (gRPC) of a
// request that waited for its model to compile: the wait in milliseconds
// (CompileWaitMillis).
const CompileWaitHeader = "kiln-compile-wait-ms"

// CompileWaitMillis prints a compile wait as CompileWaitHeader's value: whole
// milliseconds, rounded up (a request that waited never reads 0).
func CompileWaitMillis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// DTypeOf returns the element type of an OIP datatype name (modelrepo's datatype
// table).
func DTypeOf(datatype string) (tensor.DType, error) {
	if dt, ok := modelrepo.DTypeFromOIP(datatype); ok {
		return dt, nil
	}
	return 0, fmt.Errorf("%w: datatype %q is not one of %v", ErrInvalid, datatype, modelrepo.OIPDatatypes())
}

// Datatype returns the OIP name of an element type ("" when it has none: complex).
func Datatype(dt tensor.DType) string { return modelrepo.DTypeToOIP(dt) }

// maxElements bounds a request tensor's element count (a shape cannot ask for more).
const maxElements = 1 << 32

// CheckShape validates a request input's shape and returns its element count; the
// error (ErrInvalid) says what is wrong with it.
func CheckShape(name string, shape []int64) (int, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: input %q: negative dimension in shape %v", ErrInvalid, name, shape)
		}
		if d > 0 && n > maxElements/d {
			return 0, fmt.Errorf("%w: input %q: shape %v has more than %d elements", ErrInvalid, name, shape, int64(maxElements))
		}
		n *= d
	}
	return int(n), nil
}

// DecodeRaw decodes a tensor from raw little-endian bytes as the binary data extension
// and gRPC's raw_input_contents carry them; BYTES elements are each a 4-byte
// little-endian length and that many bytes.
func DecodeRaw(name, datatype string, shape []int64, raw []byte) (*tensor.Tensor, error) {
	dt, err := DTypeOf(datatype)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", name, err)
	}
	n, err := CheckShape(name, shape)
	if err != nil {
		return nil, err
	}
	ts := make(tensor.Shape, len(shape))
	for i, d := range shape {
		ts[i] = int(d)
	}
	if dt == tensor.String {
		out := make([]string, 0, n)
		b := raw
		for len(b) > 0 {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: input %q: BYTES element %d has a truncated length prefix", ErrInvalid, name, len(out))
			}
			l := binary.LittleEndian.Uint32(b)
			if uint64(l) > uint64(len(b)-4) {
				return nil, fmt.Errorf("%w: input %q: BYTES element %d claims %d bytes, %d left", ErrInvalid, name, len(out), l, len(b)-4)
			}
			out = append(out, string(b[4:4+l]))
			b = b[4+l:]
		}
		if len(out) != n {
			return nil, fmt.Errorf("%w: input %q: %d BYTES elements for shape %v (%d elements)", ErrInvalid, name, len(out), shape, n)
		}
		return tensor.FromSlice(ts, out)
	}
	if want := int64(n) * int64(dt.Size()); int64(len(raw)) != want {
		return nil, fmt.Errorf("%w: input %q: %d bytes of data for %s%v, which needs %d", ErrInvalid, name, len(raw), datatype, shape, want)
	}
	t, err := tensor.FromRaw(dt, ts, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: input %q: %v", ErrInvalid, name, err)
	}
	if dt == tensor.Bool {
		for i, c := range raw {
			if c > 1 {
				return nil, fmt.Errorf("%w: input %q: BOOL element %d is %d (want 0 or 1)", ErrInvalid, name, i, c)
			}
		}
	}
	return t, nil
}

// WrapRaw is DecodeRaw without the copy where it can: numeric data whose bytes are
// aligned become the tensor's memory (raw must then stay unchanged while the tensor is
// in use, as a request body does); the rest is decoded as DecodeRaw does.
func WrapRaw(name, datatype string, shape []int64, raw []byte) (*tensor.Tensor, error) {
	dt, err := DTypeOf(datatype)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", name, err)
	}
	if dt != tensor.Bool && dt != tensor.String {
		if _, err := CheckShape(name, shape); err != nil {
			return nil, err
		}
		ts := make(tensor.Shape, len(shape))
		for i, d := range shape {
			ts[i] = int(d)
		}
		if t, ok := tensor.FromNative(dt, ts, raw); ok {
			return t, nil
		}
	}
	return DecodeRaw(name, datatype, shape, raw)
}

// EncodeRaw is DecodeRaw's inverse. Where t's elements are already laid out as the
// protocol's little-endian bytes (numeric types on a little-endian host) the result is a
// view of t's data, not a copy: a response is sent as it is, and copying each output
// once more per request was a third of the server's garbage. Modify neither while the
// other is in use.
func EncodeRaw(t *tensor.Tensor) ([]byte, error) {
	if b, ok := t.NativeBytes(); ok {
		return b, nil
	}
	if t.DType == tensor.String {
		var out []byte
		for _, s := range t.Data.([]string) {
			if len(s) > math.MaxUint32 {
				return nil, fmt.Errorf("%w: a BYTES element longer than 4 GiB", ErrInternal)
			}
			out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
			out = append(out, s...)
		}
		return out, nil
	}
	return t.Raw()
}
