package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
)

// InputSpec describes one input of the ORT runner's manifest (inputs.json).
type InputSpec struct {
	// Index is the graph-input position; bench.js feeds it under the session's
	// Index-th input name.
	Index int `json:"index"`
	// Name is the TensorProto's name, informative only (may be empty).
	Name string `json:"name"`
	// DType is the ONNX TensorProto.DataType enum name ("FLOAT", "INT64", ...).
	DType string `json:"dtype"`
	// Dims is the tensor's shape ([] for a scalar).
	Dims []int `json:"dims"`
	// File is the raw little-endian element file, relative to the manifest.
	File string `json:"file"`
}

// Manifest is the ORT runner's inputs.json.
type Manifest struct {
	// Inputs lists the model's inputs in graph-input order.
	Inputs []InputSpec `json:"inputs"`
}

// writeORTInputs converts dataSet's input_K.pb files (K = 0, 1, ... while they exist)
// into dst/inputs.json and dst/input_K.bin, the format bench/ort/bench.js reads.
func writeORTInputs(dataSet, dst string) (*Manifest, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("ort inputs: %w", err)
	}
	m := &Manifest{Inputs: []InputSpec{}}
	for k := 0; ; k++ {
		src := filepath.Join(dataSet, fmt.Sprintf("input_%d.pb", k))
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("ort inputs: %w", err)
		}
		d, err := onnx.ReadData(src, graph.Type{Kind: graph.KindTensor})
		if err != nil {
			return nil, fmt.Errorf("ort inputs: reading %s: %w", src, err)
		}
		if d.Tensor == nil {
			return nil, fmt.Errorf("ort inputs: %s is not a tensor", src)
		}
		t := d.Tensor
		raw, err := t.Raw()
		if err != nil {
			return nil, fmt.Errorf("ort inputs: encoding %s: %w", src, err)
		}
		spec := InputSpec{
			Index: k,
			Name:  d.Name,
			DType: t.DType.ONNXName(),
			Dims:  append([]int{}, t.Shape...),
			File:  fmt.Sprintf("input_%d.bin", k),
		}
		if err := os.WriteFile(filepath.Join(dst, spec.File), raw, 0o644); err != nil {
			return nil, fmt.Errorf("ort inputs: %w", err)
		}
		m.Inputs = append(m.Inputs, spec)
	}
	if len(m.Inputs) == 0 {
		return nil, fmt.Errorf("ort inputs: no input_0.pb in %s", dataSet)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("ort inputs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dst, "inputs.json"), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("ort inputs: %w", err)
	}
	return m, nil
}
