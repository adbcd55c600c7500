package serve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// What a model configuration changes between the protocol and the model (Triton's
// reshape, label files and classification extension): a request's inputs are given in
// the config's dims and reshaped to what the model takes; the model's outputs are
// reshaped back to the config's dims; an output requested with the parameter
// classification is answered by classify.go, with the labels read here from the
// output's label_filename.

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
		labels, err := readLabels(dir, out.LabelFilename)
		if err != nil {
			return nil, fmt.Errorf("%w: output[%d].label_filename: %v", modelrepo.ErrModelConfig, i, err)
		}
		io.labels[out.Name] = labels
	}
	return io, nil
}

// readLabels reads the label file a configuration names in the model's folder dir: one
// label per line, the line's number (from 0) its class index. Like every file a
// configuration names, it stays inside that folder, symlinks resolved: a label file
// must not serve another file's lines to clients.
func readLabels(dir, name string) ([]string, error) {
	path, err := safefile.Within(dir, name)
	if err != nil {
		return nil, err
	}
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
	if m.iface != nil {
		for _, o := range m.iface.Outputs {
			if _, ok := classify[o.Name]; ok && !classifiable(o.Type.DType) {
				return nil, fmt.Errorf("%w: model %q: output %q: classification needs an integer, FP32 or FP64 output, not %s", ErrInvalid, m.name, o.Name, Datatype(o.Type.DType))
			}
		}
	}
	t0 := time.Now()
	if len(io.inputs) > 0 {
		if req, err = io.reshapeInputs(m.name, req); err != nil {
			return nil, err
		}
	}
	input := time.Since(t0)
	resp, err := m.infer(ctx, req)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
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
	resp.timing.input += input
	resp.timing.output += time.Since(t1)
	return resp, nil
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
