package onnx

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// tensorDecoder turns TensorProtos into host tensors, resolving external data relative to
// dir and refusing anything larger than limit bytes before allocating it.
type tensorDecoder struct {
	dir   string // "" forbids external data
	limit int64
	// files, when set, holds the external data files already read (by location): the
	// bytes a digest was computed from (LoadVerified); nothing else is opened
	files map[string][]byte
}

func (d *tensorDecoder) decode(tp *onnxpb.TensorProto) (*tensor.Tensor, error) {
	name := tp.GetName()
	if tp.Segment != nil {
		return nil, unsupportedf("tensor %q: segmented tensors", name)
	}
	dt := tensor.DType(tp.GetDataType())
	if !dt.Valid() {
		return nil, invalidf("tensor %q: unknown data type %d", name, tp.GetDataType())
	}
	shape := make(tensor.Shape, len(tp.GetDims()))
	for i, x := range tp.GetDims() {
		if x < 0 || x > math.MaxInt32*int64(256) {
			return nil, invalidf("tensor %q: bad extent %d", name, x)
		}
		shape[i] = int(x)
	}
	size := int64(max(dt.Size(), 1))
	n, err := shape.CheckedNumElements(d.limit / size)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		raw, err := d.external(tp, n*int64(dt.Size()))
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		return wrapShape(name, dt, shape, raw)
	}
	if tp.RawData != nil {
		return wrapShape(name, dt, shape, tp.GetRawData())
	}
	t, err := typedData(tp, dt, shape, n)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return t, nil
}

func wrapShape(name string, dt tensor.DType, shape tensor.Shape, raw []byte) (*tensor.Tensor, error) {
	if dt == tensor.String {
		return nil, invalidf("tensor %q: string tensors cannot use raw_data", name)
	}
	t, err := tensor.FromRaw(dt, shape, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrInvalid, name, err)
	}
	return t, nil
}

// typedData reads the type-specific repeated fields.
func typedData(tp *onnxpb.TensorProto, dt tensor.DType, shape tensor.Shape, n int64) (*tensor.Tensor, error) {
	want := func(got int) error {
		if int64(got) != n {
			return invalidf("%d values for shape %v (%d elements)", got, shape, n)
		}
		return nil
	}
	var data any
	switch dt {
	case tensor.Float32:
		data = tp.GetFloatData()
		if err := want(len(tp.GetFloatData())); err != nil {
			return nil, err
		}
	case tensor.Float64:
		data = tp.GetDoubleData()
		if err := want(len(tp.GetDoubleData())); err != nil {
			return nil, err
		}
	case tensor.Int64:
		data = tp.GetInt64Data()
		if err := want(len(tp.GetInt64Data())); err != nil {
			return nil, err
		}
	case tensor.Uint32, tensor.Uint64:
		v := tp.GetUint64Data()
		if err := want(len(v)); err != nil {
			return nil, err
		}
		i := make([]int64, len(v))
		for k, x := range v {
			i[k] = int64(x)
		}
		return tensor.FromInt64s(dt, shape, i), nil
	case tensor.String:
		v := tp.GetStringData()
		if err := want(len(v)); err != nil {
			return nil, err
		}
		s := make([]string, len(v))
		for k, b := range v {
			s[k] = string(b)
		}
		data = s
	case tensor.Float16, tensor.BFloat16:
		v := tp.GetInt32Data()
		if err := want(len(v)); err != nil {
			return nil, err
		}
		t := tensor.New(dt, shape)
		for k, x := range v {
			if dt == tensor.Float16 {
				t.Data.([]tensor.Float16Bits)[k] = tensor.Float16Bits(x)
			} else {
				t.Data.([]tensor.BFloat16Bits)[k] = tensor.BFloat16Bits(x)
			}
		}
		return t, nil
	case tensor.Int32, tensor.Int16, tensor.Int8, tensor.Uint16, tensor.Uint8, tensor.Bool:
		v := tp.GetInt32Data()
		if err := want(len(v)); err != nil {
			return nil, err
		}
		i := make([]int64, len(v))
		for k, x := range v {
			i[k] = int64(x)
		}
		return tensor.FromInt64s(dt, shape, i), nil
	case tensor.Complex64:
		v := tp.GetFloatData()
		if err := want(len(v) / 2); err != nil || len(v)%2 != 0 {
			return nil, invalidf("%d floats for complex shape %v", len(v), shape)
		}
		c := make([]complex64, n)
		for k := range c {
			c[k] = complex(v[2*k], v[2*k+1])
		}
		data = c
	case tensor.Complex128:
		v := tp.GetDoubleData()
		if err := want(len(v) / 2); err != nil || len(v)%2 != 0 {
			return nil, invalidf("%d doubles for complex shape %v", len(v), shape)
		}
		c := make([]complex128, n)
		for k := range c {
			c[k] = complex(v[2*k], v[2*k+1])
		}
		data = c
	default:
		return nil, unsupportedf("data type %v", dt)
	}
	if n == 0 {
		return tensor.New(dt, shape), nil
	}
	t, err := tensor.FromSlice(shape, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return t, nil
}

// external reads want bytes of external data named by the tensor's external_data entries
// (location, offset, length), refusing paths that leave the model's directory.
func (d *tensorDecoder) external(tp *onnxpb.TensorProto, want int64) ([]byte, error) {
	var loc string
	var offset, length int64 = 0, -1
	for _, kv := range tp.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || offset < 0 {
			return nil, invalidf("bad external_data %s=%q", kv.GetKey(), kv.GetValue())
		}
	}
	if d.dir == "" {
		return nil, unsupportedf("external data %q without a model directory", loc)
	}
	if loc == "" || !filepath.IsLocal(filepath.FromSlash(loc)) {
		return nil, invalidf("external data location %q leaves the model directory", loc)
	}
	if length >= 0 && length != want {
		return nil, invalidf("external data length %d, tensor needs %d bytes", length, want)
	}
	if d.files != nil {
		data, ok := d.files[loc]
		if !ok { // the digest's protobuf walk did not see this tensor: refuse, never read unhashed bytes
			return nil, unsupportedf("external data %q of a tensor outside the model's graphs and attributes", loc)
		}
		if offset > int64(len(data)) || want > int64(len(data))-offset {
			return nil, invalidf("external data %q has %d bytes, tensor needs %d at offset %d", loc, len(data), want, offset)
		}
		return data[offset : offset+want], nil
	}
	path, err := externalPath(d.dir, loc)
	if err != nil {
		return nil, err
	}
	f, err := safefile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: external data: %v", ErrInvalid, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: external data: %v", ErrInvalid, err)
	}
	if offset > st.Size() || want > st.Size()-offset {
		return nil, invalidf("external data %q has %d bytes, tensor needs %d at offset %d", loc, st.Size(), want, offset)
	}
	buf := make([]byte, want)
	if _, err := f.ReadAt(buf, offset); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: external data %q: %v", ErrInvalid, loc, err)
	}
	return buf, nil
}
