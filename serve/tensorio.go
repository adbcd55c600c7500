package serve

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// What a model configuration changes between the protocol and the model (Triton's
// reshape, label files and classification extension): a request's inputs are given in
// the config's dims and reshaped to what the model takes; the model's outputs are
// reshaped back to the config's dims; an output requested with the parameter
// classification: K is returned as its K highest-valued elements, each the string
// "<value>:<index>[:<label>]" (BYTES, shape [batch, K] when the model batches, else
// [K]), the label read from the output's label_filename.

// maxLabelFileBytes bounds a label file (ImageNet's 1000 labels are about 20 KiB).
const maxLabelFileBytes = 16 << 20

// classificationParam is the output parameter of Triton's classification extension.
const classificationParam = "classification"

// tensorIO is a model's configured tensors as they differ from the model's own.
type tensorIO struct {
	batch   bool                 // the model batches: shapes have a leading batch dim
	inputs  map[string]reshaping // inputs with a reshape
	outputs map[string]reshaping // outputs with a reshape
	labels  map[string][]string  // per output with a label file: the labels by class index
}

// reshaping relates the dims clients see (config) to those the model sees (model),
// both without the batch dim.
type reshaping struct{ config, model []int64 }

// tensorIOOf reads what a configuration changes at the protocol, its label files from
// the model's folder included.
func tensorIOOf(c *modelpb.ModelConfig, dir string) (*tensorIO, error) {
	io := &tensorIO{batch: c.MaxBatchSize > 0, inputs: map[string]reshaping{}, outputs: map[string]reshaping{}, labels: map[string][]string{}}
	for _, in := range c.Input {
		if in.Reshape != nil {
			io.inputs[in.Name] = reshaping{config: in.Dims, model: in.Reshape.Shape}
		}
	}
	for i, out := range c.Output {
		if out.Reshape != nil {
			io.outputs[out.Name] = reshaping{config: out.Dims, model: out.Reshape.Shape}
		}
		if out.LabelFilename == "" {
			continue
		}
		labels, err := readLabels(filepath.Join(dir, out.LabelFilename))
		if err != nil {
			return nil, fmt.Errorf("%w: output[%d].label_filename: %v", modelrepo.ErrModelConfig, i, err)
		}
		io.labels[out.Name] = labels
	}
	return io, nil
}

// readLabels reads a label file: one label per line, the line's number (from 0) its
// class index.
func readLabels(path string) ([]string, error) {
	data, err := safefile.ReadFile(path, maxLabelFileBytes)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines, nil
}

// inferConfigured runs a request given in the configuration's terms: inputs reshaped
// to the model's, outputs reshaped back and classified as requested.
func (m *model) inferConfigured(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	io := m.spec.io
	if io == nil {
		io = &tensorIO{}
	}
	classify, err := classifications(req)
	if err != nil {
		return nil, err
	}
	if len(io.inputs) > 0 {
		if req, err = io.reshapeInputs(m.name, req); err != nil {
			return nil, err
		}
	}
	resp, err := m.infer(ctx, req)
	if err != nil {
		return nil, err
	}
	for i := range resp.Outputs {
		o := &resp.Outputs[i]
		if r, ok := io.outputs[o.Name]; ok {
			shape, ok := mapShape(o.Shape, r.model, r.config, io.batch)
			if !ok {
				return nil, fmt.Errorf("%w: model %q gave output %q the shape %v, not the config's reshape %v", ErrInternal, m.name, o.Name, o.Shape, r.model)
			}
			if o.Data, err = o.Data.Reshape(intShape(shape)); err != nil {
				return nil, fmt.Errorf("%w: model %q: output %q: %v", ErrInternal, m.name, o.Name, err)
			}
			o.Shape = shape
		}
		if k, ok := classify[o.Name]; ok {
			if *o, err = classify1(*o, k, io.batch, io.labels[o.Name]); err != nil {
				return nil, fmt.Errorf("model %q: %w", m.name, err)
			}
		}
	}
	return resp, nil
}

// classifications reads the classification parameter of each requested output.
func classifications(req *InferRequest) (map[string]int, error) {
	var out map[string]int
	for _, o := range req.Outputs {
		v, ok := o.Params[classificationParam]
		if !ok {
			continue
		}
		var k int64
		switch n := v.(type) {
		case int64:
			k = n
		case uint64:
			k = int64(min(n, math.MaxInt32))
		case float64: // a JSON number
			if n != math.Trunc(n) {
				k = -1
			} else {
				k = int64(max(min(n, math.MaxInt32), -1))
			}
		default:
			return nil, fmt.Errorf("%w: output %q: parameter %q is %T, not an integer", ErrInvalid, o.Name, classificationParam, v)
		}
		if k < 1 {
			return nil, fmt.Errorf("%w: output %q: parameter %q must be a positive integer (the number of classes), not %v", ErrInvalid, o.Name, classificationParam, v)
		}
		if out == nil {
			out = map[string]int{}
		}
		out[o.Name] = int(min(k, math.MaxInt32))
	}
	return out, nil
}

// reshapeInputs checks the reshaped inputs against the config's dims and gives them
// the model's shape; the request is copied, not changed.
func (io *tensorIO) reshapeInputs(model string, req *InferRequest) (*InferRequest, error) {
	cp := *req
	cp.Inputs = slices.Clone(req.Inputs)
	for i := range cp.Inputs {
		in := &cp.Inputs[i]
		r, ok := io.inputs[in.Name]
		if !ok || in.Data == nil {
			continue
		}
		t, shape, ok := io.toModel(in.Name, in.Data, in.Shape)
		if !ok {
			want := r.config
			if io.batch {
				want = append([]int64{-1}, want...)
			}
			return nil, fmt.Errorf("%w: input %q has shape %v, model %q takes %v", ErrInvalid, in.Name, in.Shape, model, want)
		}
		in.Shape, in.Data = shape, t
	}
	return &cp, nil
}

// mapShape maps a shape matching the dims from (after the batch dim when batch) to
// the dims to: the batch dim is kept and to's variable dims (-1) take the values of
// from's, in order. It reports false when shape does not match from or the result
// does not hold as many elements.
func mapShape(shape, from, to []int64, batch bool) ([]int64, bool) {
	var out []int64
	if batch {
		if len(shape) == 0 {
			return nil, false
		}
		out, shape = append(out, shape[0]), shape[1:]
	}
	if len(shape) != len(from) {
		return nil, false
	}
	var free []int64
	for i, d := range from {
		switch {
		case d == -1:
			free = append(free, shape[i])
		case d != shape[i]:
			return nil, false
		}
	}
	for _, d := range to {
		if d == -1 {
			if len(free) == 0 {
				return nil, false
			}
			d, free = free[0], free[1:]
		}
		out = append(out, d)
	}
	body := out
	if batch {
		body = out[1:]
	}
	if len(free) != 0 || product(body) != product(shape) {
		return nil, false
	}
	return out, true
}

func product(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func intShape(s []int64) tensor.Shape {
	out := make(tensor.Shape, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// classify1 replaces an output by its top k classes per batch entry (the whole tensor
// when the model does not batch), in Triton's format: "<value>:<index>[:<label>]",
// integer values in decimal and floating-point ones as C's "%f" prints them (6
// decimals), highest value first (equal values by index).
func classify1(o Tensor, k int, batch bool, labels []string) (Tensor, error) {
	values, err := classValues(o.Data)
	if err != nil {
		return Tensor{}, fmt.Errorf("%w: output %q: %v", ErrInvalid, o.Name, err)
	}
	rows := 1
	if batch && len(o.Shape) > 0 {
		rows = int(o.Shape[0])
	}
	per := 0
	if rows > 0 {
		per = len(values) / rows
	}
	k = min(k, per)
	out := make([]string, 0, rows*k)
	idx := make([]int, per)
	for r := range rows {
		row := values[r*per : (r+1)*per]
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(row[b].f, row[a].f) })
		for _, i := range idx[:k] {
			s := row[i].s + ":" + strconv.Itoa(i)
			if i < len(labels) {
				s += ":" + labels[i]
			}
			out = append(out, s)
		}
	}
	shape := []int64{int64(k)}
	if batch {
		shape = []int64{int64(rows), int64(k)}
	}
	t, err := tensor.FromSlice(intShape(shape), out)
	if err != nil {
		return Tensor{}, fmt.Errorf("%w: output %q: %v", ErrInternal, o.Name, err)
	}
	return Tensor{Name: o.Name, Datatype: "BYTES", Shape: shape, Data: t}, nil
}

// classValue is an element as classification compares (f) and prints (s) it.
type classValue struct {
	f float64
	s string
}

// classValues reads the elements of a numeric output, as Triton's classification
// accepts them (integers, FP32, FP64).
func classValues(t *tensor.Tensor) ([]classValue, error) {
	fl := func(f float64) classValue { return classValue{f, formatFixed(f)} }
	in := func(i int64) classValue { return classValue{float64(i), strconv.FormatInt(i, 10)} }
	switch d := t.Data.(type) {
	case []float32:
		return mapValues(d, func(v float32) classValue { return fl(float64(v)) }), nil
	case []float64:
		return mapValues(d, fl), nil
	case []int8:
		return mapValues(d, func(v int8) classValue { return in(int64(v)) }), nil
	case []int16:
		return mapValues(d, func(v int16) classValue { return in(int64(v)) }), nil
	case []int32:
		return mapValues(d, func(v int32) classValue { return in(int64(v)) }), nil
	case []int64:
		return mapValues(d, in), nil
	case []uint8:
		return mapValues(d, func(v uint8) classValue { return in(int64(v)) }), nil
	case []uint16:
		return mapValues(d, func(v uint16) classValue { return in(int64(v)) }), nil
	case []uint32:
		return mapValues(d, func(v uint32) classValue { return in(int64(v)) }), nil
	case []uint64:
		return mapValues(d, func(v uint64) classValue {
			return classValue{float64(v), strconv.FormatUint(v, 10)}
		}), nil
	}
	return nil, fmt.Errorf("classification needs an integer, FP32 or FP64 output, not %s", Datatype(t.DType))
}

func mapValues[T any](d []T, f func(T) classValue) []classValue {
	out := make([]classValue, len(d))
	for i, v := range d {
		out[i] = f(v)
	}
	return out
}

// clientShape is a tensor's shape as clients see it in metadata: for a reshaped
// tensor, the config's dims (after a -1 batch dim when the model batches), else the
// model's shape.
func (io *tensorIO) clientShape(name string, input bool, model []int64) []int64 {
	if io == nil {
		return model
	}
	rs := io.outputs
	if input {
		rs = io.inputs
	}
	r, ok := rs[name]
	if !ok {
		return model
	}
	if io.batch {
		return append([]int64{-1}, r.config...)
	}
	return slices.Clone(r.config)
}

// formatFixed prints a value as C's printf("%f") does, which Triton's classification
// uses (std::to_string): 6 decimals, "nan", "inf", "-inf".
func formatFixed(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}

// toModel gives an input tensor in the config's dims the model's shape (itself when
// the input has no reshape); it reports false when the shape does not match the
// config's dims.
func (io *tensorIO) toModel(name string, t *tensor.Tensor, shape []int64) (*tensor.Tensor, []int64, bool) {
	if io == nil {
		return t, shape, true
	}
	r, ok := io.inputs[name]
	if !ok {
		return t, shape, true
	}
	to, ok := mapShape(shape, r.config, r.model, io.batch)
	if !ok {
		return nil, nil, false
	}
	rt, err := t.Reshape(intShape(to))
	if err != nil {
		return nil, nil, false
	}
	return rt, to, true
}
