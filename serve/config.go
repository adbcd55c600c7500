package serve

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/configs/modelpb"
	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/loader/onnx"
)

// maxConfigBytes bounds a config.pbtxt (Triton's are a few kilobytes; warm-up samples
// keep their data in files).
const maxConfigBytes = 4 << 20

// loadConfig builds a model's configuration: its config.pbtxt when there is one
// (ignored fields logged), completed from the model's interface as Triton's
// auto-complete does (name, platform, inputs, outputs, instance group, version
// policy), validated, and checked against the model.
func (s *Service) loadConfig(d modelDir, it *onnx.Interface) (*modelpb.ModelConfig, error) {
	c := &modelpb.ModelConfig{}
	if d.config != "" {
		data, err := safefile.ReadFile(d.config, maxConfigBytes)
		if err != nil {
			return nil, err
		}
		parsed, warnings, err := configs.ParseModelConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.config, err)
		}
		for _, w := range warnings {
			s.log.Warn("model config", zap.String("model", d.name), zap.String("note", w))
		}
		c = parsed
	}
	if c.Name == "" {
		c.Name = d.name
	} else if c.Name != d.name {
		return nil, fmt.Errorf("config.pbtxt names the model %q, its folder is %q", c.Name, d.name)
	}
	if c.Platform == "" && c.Backend == "" {
		c.Platform = configs.PlatformONNX
	}
	batch := c.MaxBatchSize > 0
	if len(c.Input) == 0 {
		for _, p := range it.Inputs {
			dt, dims, err := configTensor(p, batch)
			if err != nil {
				return nil, err
			}
			c.Input = append(c.Input, &modelpb.ModelInput{Name: p.Name, DataType: dt, Dims: dims})
		}
	}
	if len(c.Output) == 0 {
		for _, p := range it.Outputs {
			dt, dims, err := configTensor(p, batch)
			if err != nil {
				return nil, err
			}
			c.Output = append(c.Output, &modelpb.ModelOutput{Name: p.Name, DataType: dt, Dims: dims})
		}
	}
	if len(c.InstanceGroup) == 0 {
		c.InstanceGroup = []*modelpb.ModelInstanceGroup{{Name: d.name, Kind: modelpb.ModelInstanceGroup_KIND_CPU, Count: int32(s.opts.Instances)}}
	}
	if c.VersionPolicy == nil {
		c.VersionPolicy = &modelpb.ModelVersionPolicy{PolicyChoice: &modelpb.ModelVersionPolicy_Latest_{Latest: &modelpb.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	if err := configs.ValidateModelConfig(c); err != nil {
		return nil, err
	}
	if err := checkAgainstModel(c, it); err != nil {
		return nil, err
	}
	return c, nil
}

// configTensor is a model input or output as a config entry: without the batch dim
// when the model batches, -1 for free dims.
func configTensor(p onnx.NamedType, batch bool) (modelpb.DataType, []int64, error) {
	dt := modelpb.DataType_TYPE_INVALID
	if name := Datatype(p.Type.DType); name != "" {
		dt, _ = configs.DataTypeFromOIP(name)
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

// checkAgainstModel: every configured input exists in the model with the same type and
// compatible dims (and a free first dim when the model batches).
func checkAgainstModel(c *modelpb.ModelConfig, it *onnx.Interface) error {
	byName := map[string]onnx.NamedType{}
	for _, p := range it.Inputs {
		byName[p.Name] = p
	}
	batch := c.MaxBatchSize > 0
	for _, in := range c.Input {
		p, ok := byName[in.Name]
		if !ok {
			return fmt.Errorf("config input %q is not an input of the model (inputs: %v)", in.Name, inputNames(it))
		}
		if want, _ := configs.DataTypeToOIP(in.DataType); want != Datatype(p.Type.DType) {
			return fmt.Errorf("config input %q is %s, the model's is %s", in.Name, want, Datatype(p.Type.DType))
		}
		if p.Type.UnknownRank {
			continue
		}
		model := dimsOf(p.Type)
		if batch {
			if len(model) == 0 || model[0] >= 0 {
				return fmt.Errorf("max_batch_size is %d, but the model's input %q has no free batch dimension (%v)", c.MaxBatchSize, in.Name, model)
			}
			model = model[1:]
		}
		if len(model) != len(in.Dims) {
			return fmt.Errorf("config input %q has dims %v, the model's has %v (after the batch dim)", in.Name, in.Dims, model)
		}
		for i, d := range in.Dims {
			if d >= 0 && model[i] >= 0 && d != model[i] {
				return fmt.Errorf("config input %q has dims %v, the model's has %v", in.Name, in.Dims, model)
			}
		}
	}
	for _, p := range it.Inputs {
		if !slices.ContainsFunc(c.Input, func(in *modelpb.ModelInput) bool { return in.Name == p.Name }) {
			return fmt.Errorf("the model's input %q is not in config.pbtxt", p.Name)
		}
	}
	return checkMaxDims(c, it)
}

func inputNames(it *onnx.Interface) []string {
	var out []string
	for _, p := range it.Inputs {
		out = append(out, p.Name)
	}
	return out
}

// specOf derives what the server does from a configuration.
func (s *Service) specOf(c *modelpb.ModelConfig) *Spec {
	sp := &Spec{Platform: c.Platform, MaxBatchSize: int(c.MaxBatchSize)}
	if sp.Platform == "" {
		sp.Platform = configs.PlatformONNX
	}
	for _, g := range c.InstanceGroup {
		if g.Kind == modelpb.ModelInstanceGroup_KIND_GPU {
			s.log.Warn("instance_group asks for GPUs; kiln serves this model on the CPU (GPU devices are not built yet)", zap.String("model", c.Name))
		}
		sp.Instances += max(int(g.Count), 1)
	}
	if db := c.GetDynamicBatching(); db != nil && c.MaxBatchSize > 0 {
		b := &BatchSpec{MaxBatchSize: int(c.MaxBatchSize), MaxDelay: time.Duration(db.MaxQueueDelayMicroseconds) * time.Microsecond}
		for _, p := range db.PreferredBatchSize {
			b.Preferred = append(b.Preferred, int(p))
		}
		sp.Batching = b
	}
	if p, ok := c.Parameters["compile"]; ok && p.StringValue == "eager" {
		sp.Eager = true
	}
	if len(c.ModelWarmup) > 0 { // Triton warms up before the model is ready
		sp.Eager = true
	}
	return sp
}

// servedVersions applies the version policy to the versions present (newest first).
func servedVersions(c *modelpb.ModelConfig, vs []version) []version {
	vp := c.GetVersionPolicy()
	switch {
	case vp.GetAll() != nil:
		return vs
	case vp.GetSpecific() != nil:
		var out []version
		for _, v := range vs {
			if slices.Contains(vp.GetSpecific().Versions, v.number) {
				out = append(out, v)
			}
		}
		return out
	}
	n := 1
	if l := vp.GetLatest(); l != nil && l.NumVersions > 0 {
		n = int(l.NumVersions)
	}
	return vs[:min(n, len(vs))]
}

// ModelConfig returns a model version's configuration (the completed one).
func (s *Service) ModelConfig(name, version string) (*modelpb.ModelConfig, error) {
	m, err := s.lookup(name, version)
	if err != nil {
		return nil, err
	}
	if m.config == nil {
		return nil, fmt.Errorf("%w: model %q has no configuration: %s", ErrUnavailable, name, m.status().Reason)
	}
	return proto.Clone(m.config).(*modelpb.ModelConfig), nil
}
