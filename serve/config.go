package serve

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// loadConfig builds a model's configuration: the one given to the load API
// (modelDir.override), else its config.pbtxt when there is one, where a Triton field
// kiln does not implement is an error naming it; completed from the model's interface
// as Triton's auto-complete does (modelrepo.AutoComplete), validated, and checked
// against the model.
func (s *Service) loadConfig(d modelDir, it *onnx.Interface) (*modelpb.ModelConfig, error) {
	c := &modelpb.ModelConfig{}
	switch {
	case d.override != nil:
		c = proto.Clone(d.override).(*modelpb.ModelConfig)
	case d.config != "":
		parsed, unimplemented, err := modelrepo.ReadModelConfig(d.config)
		if err != nil {
			return nil, err
		}
		if len(unimplemented) > 0 {
			return nil, fmt.Errorf("%w: %s: %s", modelrepo.ErrModelConfig, d.config, strings.Join(unimplemented, "; "))
		}
		c = parsed
	}
	if err := tensorsOnly(it); err != nil {
		return nil, err
	}
	if err := modelrepo.AutoComplete(c, d.name, it, s.opts.Instances); err != nil {
		return nil, err
	}
	if err := modelrepo.ValidateModelConfig(c); err != nil {
		return nil, err
	}
	if err := checkAgainstModel(c, it); err != nil {
		return nil, err
	}
	return c, nil
}

// checkAgainstModel checks a configuration against the model's interface, its max_dims
// parameter included.
func checkAgainstModel(c *modelpb.ModelConfig, it *onnx.Interface) error {
	if err := modelrepo.CheckAgainstModel(c, it); err != nil {
		return err
	}
	defaults := map[string]bool{}
	for _, p := range it.Inputs {
		defaults[p.Name] = p.Default != nil
	}
	for i, in := range c.GetInput() {
		// a request may omit an input only if the model has a default for it (an
		// initializer of the same name, onnx.NamedType.Default)
		if in.GetOptional() && !defaults[in.GetName()] {
			return &modelrepo.FieldError{Field: fmt.Sprintf("input[%d].optional", i),
				Msg: fmt.Sprintf("input %q is optional, but the model cannot run without it: it has no default value (an initializer of the same name)", in.GetName())}
		}
	}
	return checkMaxDims(c, it)
}

// specOf derives what the server does from a configuration.
func (s *Service) specOf(c *modelpb.ModelConfig) *Spec {
	sp := &Spec{Platform: c.Platform, MaxBatchSize: int(c.MaxBatchSize)}
	for _, in := range c.GetInput() {
		if in.GetOptional() {
			if sp.optional == nil {
				sp.optional = map[string]bool{}
			}
			sp.optional[in.GetName()] = true
		}
	}
	if sp.Platform == "" {
		sp.Platform = modelrepo.PlatformONNX
	}
	sp.on = s.instancesOf(c)
	for _, o := range sp.on {
		sp.Instances += o.count
	}
	if db := c.GetDynamicBatching(); db != nil && c.MaxBatchSize > 0 {
		b := &BatchSpec{MaxBatchSize: int(c.MaxBatchSize), MaxDelay: time.Duration(db.MaxQueueDelayMicroseconds) * time.Microsecond}
		for _, p := range db.PreferredBatchSize {
			b.Preferred = append(b.Preferred, int(p))
		}
		b.PriorityLevels, b.DefaultPriority = int(db.PriorityLevels), int(db.DefaultPriorityLevel)
		b.QueuePolicy = queuePolicyOf(db.DefaultQueuePolicy)
		for level, q := range db.PriorityQueuePolicy {
			if b.LevelPolicies == nil {
				b.LevelPolicies = map[int]QueuePolicy{}
			}
			b.LevelPolicies[int(level)] = queuePolicyOf(q)
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

// queuePolicyOf is a configured queue policy (nil: Triton's default, an unbounded
// queue without timeouts).
func queuePolicyOf(q *modelpb.ModelQueuePolicy) QueuePolicy {
	return QueuePolicy{
		Timeout:       time.Duration(min(q.GetDefaultTimeoutMicroseconds(), math.MaxInt64/uint64(time.Microsecond))) * time.Microsecond,
		Delay:         q.GetTimeoutAction() == modelpb.ModelQueuePolicy_DELAY,
		AllowOverride: q.GetAllowTimeoutOverride(),
		MaxSize:       int(q.GetMaxQueueSize()),
	}
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
