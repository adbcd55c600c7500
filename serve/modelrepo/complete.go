package modelrepo

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// maxConfigFileBytes bounds the config.pbtxt file ReadModelConfig reads (Triton's are a
// few kilobytes; warm-up samples keep their data in files). ParseModelConfig refuses
// more than MaxModelConfigBytes of it with a SyntaxError.
const maxConfigFileBytes = 4 << 20

// ReadModelConfig reads and parses a model's config.pbtxt (Model.Config); errors name
// the file. The result is neither completed nor validated.
func ReadModelConfig(path string) (*modelpb.ModelConfig, []string, error) {
	data, err := safefile.ReadFile(path, maxConfigFileBytes)
	if err != nil {
		return nil, nil, err
	}
	c, warnings, err := ParseModelConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, warnings, nil
}

// AutoComplete fills in what a model configuration leaves out, from the model's
// interface and the server's defaults, as Triton's auto-complete does: the name (the
// model's folder; a config naming another model is an error), the platform, the inputs
// and outputs (without the batch dim when the model batches, -1 for free dims; an
// input with a default is optional, and is added, optional, to a config that lists
// other inputs but not it), one
// CPU instance group of instances, and a version policy serving the latest version.
// Validate the result with ValidateModelConfig, then CheckAgainstModel.
func AutoComplete(c *modelpb.ModelConfig, name string, it *onnx.Interface, instances int) error {
	if c.Name == "" {
		c.Name = name
	} else if c.Name != name {
		return fmt.Errorf("config.pbtxt names the model %q, its folder is %q", c.Name, name)
	}
	if c.Platform == "" && c.Backend == "" {
		c.Platform = PlatformONNX
	}
	batch := c.MaxBatchSize > 0
	seqIn, seqOut := SequenceInputs(c), SequenceOutputs(c) // the server's, not the clients'
	listed := len(c.Input) > 0
	for _, p := range it.Inputs {
		if seqIn[p.Name] || (listed && (p.Default == nil || slices.ContainsFunc(c.Input, func(in *modelpb.ModelInput) bool { return in.Name == p.Name }))) {
			continue
		}
		dt, dims, err := configTensor(p, batch)
		if err != nil {
			return err
		}
		c.Input = append(c.Input, &modelpb.ModelInput{Name: p.Name, DataType: dt, Dims: dims, Optional: p.Default != nil})
	}
	if len(c.Output) == 0 {
		for _, p := range it.Outputs {
			if seqOut[p.Name] {
				continue
			}
			dt, dims, err := configTensor(p, batch)
			if err != nil {
				return err
			}
			c.Output = append(c.Output, &modelpb.ModelOutput{Name: p.Name, DataType: dt, Dims: dims})
		}
	}
	if len(c.InstanceGroup) == 0 {
		c.InstanceGroup = []*modelpb.ModelInstanceGroup{{Name: name, Kind: modelpb.ModelInstanceGroup_KIND_CPU, Count: int32(instances)}}
	}
	if c.VersionPolicy == nil {
		c.VersionPolicy = &modelpb.ModelVersionPolicy{PolicyChoice: &modelpb.ModelVersionPolicy_Latest_{Latest: &modelpb.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	return nil
}

// configTensor is a model input or output as a config entry: without the batch dim
// when the model batches, -1 for free dims.
func configTensor(p onnx.NamedType, batch bool) (modelpb.DataType, []int64, error) {
	dt := modelpb.DataType_TYPE_INVALID
	if name := DTypeToOIP(p.Type.DType); name != "" {
		dt, _ = DataTypeFromOIP(name)
	}
	if p.Type.UnknownRank {
		return dt, []int64{-1}, nil
	}
	dims := dimsOf(p.Type)
	if batch {
		if len(dims) == 0 {
			return dt, nil, fmt.Errorf("max_batch_size > 0, but %q is a scalar: it has no batch dimension", p.Name)
		}
		dims = dims[1:]
	}
	return dt, dims, nil
}

// CheckAgainstModel checks a configuration against the model it configures: every
// configured input and output exists in the model with the same type and compatible
// dims (its reshape's shape when it has one: the dims are what clients send and
// receive, the reshape is what the model takes and gives; and a free first dim when
// the model batches), and every input of the model is configured.
func CheckAgainstModel(c *modelpb.ModelConfig, it *onnx.Interface) error {
	byName := map[string]onnx.NamedType{}
	for _, p := range it.Inputs {
		byName[p.Name] = p
	}
	for _, in := range c.Input {
		p, ok := byName[in.Name]
		if !ok && slices.Contains(it.Constants, in.Name) {
			return fmt.Errorf("config input %q is a constant of the model, folded into it: the model's IR version is below 4 (every initializer is listed as a graph input) or it lists every one of its many initializers as an input (weights exported as inputs), and kiln makes no such initializer an input a request can give (export the model with IR version 4 or later, without its weights as inputs, to make it an input with a default)", in.Name)
		}
		if !ok {
			return fmt.Errorf("config input %q is not an input of the model (inputs: %v)", in.Name, names(it.Inputs))
		}
		if err := checkTensor("input", c.MaxBatchSize, in.Name, in.DataType, ModelDims(in.Dims, in.Reshape), p); err != nil {
			return err
		}
	}
	seqIn := SequenceInputs(c)
	for _, in := range c.Input {
		if seqIn[in.Name] {
			return fmt.Errorf("config input %q is a control or state input of sequence_batching, which the server gives the model", in.Name)
		}
	}
	for _, p := range it.Inputs {
		if !seqIn[p.Name] && !slices.ContainsFunc(c.Input, func(in *modelpb.ModelInput) bool { return in.Name == p.Name }) {
			return fmt.Errorf("the model's input %q is not in config.pbtxt", p.Name)
		}
	}
	byName = map[string]onnx.NamedType{}
	for _, p := range it.Outputs {
		byName[p.Name] = p
	}
	for _, out := range c.Output {
		if SequenceOutputs(c)[out.Name] {
			return fmt.Errorf("config output %q is a state output of sequence_batching, which the server keeps", out.Name)
		}
		p, ok := byName[out.Name]
		if !ok {
			return fmt.Errorf("config output %q is not an output of the model (outputs: %v)", out.Name, names(it.Outputs))
		}
		if err := checkTensor("output", c.MaxBatchSize, out.Name, out.DataType, ModelDims(out.Dims, out.Reshape), p); err != nil {
			return err
		}
	}
	return checkSequenceAgainstModel(c, it)
}

// ModelDims is the shape the model itself takes or gives for a configured tensor
// (without the batch dim): the reshape's shape when there is one, else the dims.
func ModelDims(dims []int64, reshape *modelpb.ModelTensorReshape) []int64 {
	if reshape != nil {
		return reshape.GetShape()
	}
	return dims
}

// checkTensor checks one configured tensor (its dims as the model sees them) against
// the model's declaration.
func checkTensor(kind string, maxBatch int32, name string, dt modelpb.DataType, dims []int64, p onnx.NamedType) error {
	if want, _ := DataTypeToOIP(dt); want != DTypeToOIP(p.Type.DType) {
		return fmt.Errorf("config %s %q is %s, the model's is %s", kind, name, want, DTypeToOIP(p.Type.DType))
	}
	if p.Type.UnknownRank {
		return nil
	}
	model := dimsOf(p.Type)
	if maxBatch > 0 {
		if len(model) == 0 || model[0] >= 0 {
			return fmt.Errorf("max_batch_size is %d, but the model's %s %q has no free batch dimension (%v)", maxBatch, kind, name, model)
		}
		model = model[1:]
	}
	if len(model) != len(dims) {
		return fmt.Errorf("config %s %q has dims %v, the model's has %v (after the batch dim)", kind, name, dims, model)
	}
	for i, d := range dims {
		if d >= 0 && model[i] >= 0 && d != model[i] {
			return fmt.Errorf("config %s %q has dims %v, the model's has %v", kind, name, dims, model)
		}
	}
	return nil
}

func names(ps []onnx.NamedType) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// dimsOf is a declared shape as config dims: -1 for a free dim.
func dimsOf(t graph.Type) []int64 {
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		if v, ok := d.Value(); ok {
			out[i] = v
		} else {
			out[i] = -1
		}
	}
	return out
}
