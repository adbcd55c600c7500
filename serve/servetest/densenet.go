package servetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DensenetConfig is the densenet_onnx config.pbtxt of Triton's documentation with the
// tensor names and the output's reshape adapted to kiln's bundled SqueezeNet
// (examples/models/squeezenet1_1: input "input" [1,3,224,224], output "logits"
// [1,1000]): max_batch_size 0, the input's dims [3,224,224] reshaped to the model's,
// the output's dims [1000] reshaped from the model's, and a label file.
const DensenetConfig = `name: "densenet"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000 ] }
    label_filename: "densenet_labels.txt"
  }
]
`

// WriteDensenetRepo makes repo a model repository holding the SqueezeNet file at
// squeezenet (linked) as the model "densenet", with DensenetConfig and a label file
// naming class i "class<i>".
func WriteDensenetRepo(repo, squeezenet string) error {
	src, err := filepath.Abs(squeezenet)
	if err != nil {
		return err
	}
	dir := filepath.Join(repo, "densenet")
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(src, filepath.Join(dir, "1", "model.onnx")); err != nil {
		return err
	}
	var labels strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&labels, "class%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "densenet_labels.txt"), []byte(labels.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(DensenetConfig), 0o644)
}

// TopClasses is what Triton's classification extension returns for the logits of
// the model WriteDensenetRepo writes: the k highest, highest first, each
// "<value>:<index>:class<index>" with the value as C's "%f" prints it.
func TopClasses(logits []float32, k int) []string {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	var out []string
	for _, i := range idx[:k] {
		out = append(out, fmt.Sprintf("%f:%d:class%d", logits[i], i, i))
	}
	return out
}
