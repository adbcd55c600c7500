// Package zooreq builds the Open Inference Protocol request the serving benchmarks send for
// a zoo model (a folder in the ONNX backend-test layout): the binary-extension REST body
// and header, and the same tensors for gRPC's raw_input_contents.
//
// Float inputs come from the folder's test_data_set_0; int64 inputs are a [1, seq] batch
// of token ids (random, seeded), an attention mask of ones (names containing "mask") or
// token types of zeros (names containing "type"): what bert_tiny and gpt2_tiny take.
package zooreq

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/tensor"
)

// Input is one request tensor.
type Input struct {
	Name     string
	Datatype string // the protocol's name: FP32, INT64, ...
	Shape    []int64
	Raw      []byte // little-endian contents
}

// Request is one inference request for a model.
type Request struct {
	Inputs []Input
	// Body is the REST body: the JSON header asking for binary outputs, then every
	// input's bytes; Header holds Inference-Header-Content-Length.
	Body   []byte
	Header map[string]string
}

// Shapes maps each input's name to its shape.
func (r *Request) Shapes() map[string][]int64 {
	m := map[string][]int64{}
	for _, in := range r.Inputs {
		m[in.Name] = in.Shape
	}
	return m
}

// Build reads dir/model.onnx's inputs and makes the request, int64 inputs [1, seq].
func Build(dir string, seq int) (*Request, error) {
	it, err := onnx.ReadInterface(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return nil, err
	}
	type jin struct {
		Name       string         `json:"name"`
		Datatype   string         `json:"datatype"`
		Shape      []int64        `json:"shape"`
		Parameters map[string]int `json:"parameters"`
	}
	var r Request
	var head []jin
	var raw []byte
	rng := rand.New(rand.NewSource(1))
	for k, p := range it.Inputs {
		var t *tensor.Tensor
		if p.Type.DType == tensor.Int64 {
			t = tensor.New(tensor.Int64, tensor.Shape{1, seq})
			for i := range t.Data.([]int64) {
				switch {
				case strings.Contains(p.Name, "mask"):
					t.Data.([]int64)[i] = 1
				case strings.Contains(p.Name, "type"):
				default:
					t.Data.([]int64)[i] = int64(rng.Intn(1000))
				}
			}
		} else {
			d, err := onnx.ReadData(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", k)), p.Type)
			if err != nil {
				return nil, err
			}
			t = d.Tensor
		}
		b, err := serve.EncodeRaw(t)
		if err != nil {
			return nil, err
		}
		shape := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int64(d)
		}
		r.Inputs = append(r.Inputs, Input{p.Name, serve.Datatype(t.DType), shape, b})
		head = append(head, jin{p.Name, serve.Datatype(t.DType), shape, map[string]int{"binary_data_size": len(b)}})
		raw = append(raw, b...)
	}
	h, err := json.Marshal(map[string]any{"inputs": head, "parameters": map[string]bool{"binary_data_output": true}})
	if err != nil {
		return nil, err
	}
	r.Body = append(h, raw...)
	r.Header = map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(h))}
	return &r, nil
}
