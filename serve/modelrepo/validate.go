package modelrepo

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// DefaultModelFilename is the model file of each version folder when the config
// does not name another (default_model_filename).
const DefaultModelFilename = "model.onnx"

// Parameters are the config parameters kiln implements: "compile" ("eager": compile
// at load) and "max_dims" (bounds of free dims, "seq=512"). Any other key is refused.
var Parameters = []string{"compile", "max_dims"}

// The platform and backend names under which Triton serves ONNX models; kiln serves no
// other kind.
const (
	PlatformONNX = "onnxruntime_onnx"
	BackendONNX  = "onnxruntime"
)

// ValidateModelConfig applies the rules Triton applies to a model configuration that
// make sense for kiln, and returns every violation found, each a *FieldError naming
// the field (joined with errors.Join; errors.Is(err, ErrModelConfig) holds). It checks
// what the config states and fills nothing in: the server sets the name from the
// model's directory, and inputs, outputs, version policy and instance groups that the
// config leaves out from the model and its defaults, then validates the result.
//
// Refused because kiln does not implement them (Triton accepts them):
// allow_ragged_batch inputs and parameters other than those in Parameters. Whether
// the model can run without an optional input is the server's check against the
// model, not this one.
//
// Departures from Triton: a tensor with empty dims is a scalar (Triton rejects it;
// ONNX models have scalar inputs); shape tensors are rejected (a TensorRT feature); a
// warm-up sample's batch_size may not exceed max_batch_size (1 when the model does not
// batch), and its input_data_file and the model's file names may not leave the model's
// directory.
func ValidateModelConfig(c *modelpb.ModelConfig) error {
	if c == nil {
		return &FieldError{Field: "config", Msg: "is missing"}
	}
	v := &validator{}
	if c.GetName() == "" {
		v.add("name", "must be set")
	}
	if p := c.GetPlatform(); p != "" && p != PlatformONNX {
		v.add("platform", "%q is not served by kiln, which serves %q models", p, PlatformONNX)
	}
	if b := c.GetBackend(); b != "" && b != BackendONNX {
		v.add("backend", "%q is not served by kiln, which serves %q models", b, BackendONNX)
	}
	if c.GetMaxBatchSize() < 0 {
		v.add("max_batch_size", "must be 0 (no batching) or positive, not %d", c.GetMaxBatchSize())
	} else if c.GetMaxBatchSize() > MaxBatchSize {
		v.add("max_batch_size", "%d is more than kiln's limit of %d", c.GetMaxBatchSize(), MaxBatchSize)
	}
	if c.GetVersionPolicy() != nil {
		v.versionPolicy(c.GetVersionPolicy())
	}
	if name := c.GetDefaultModelFilename(); name != "" {
		v.fileName("default_model_filename", name)
	}

	seen := map[string]bool{}
	for i, in := range c.GetInput() {
		field := fmt.Sprintf("input[%d]", i)
		v.tensor(field, in.GetName(), in.GetDataType(), in.GetDims(), in.GetReshape(), seen)
		switch f := in.GetFormat(); f {
		case modelpb.ModelInput_FORMAT_NONE:
		case modelpb.ModelInput_FORMAT_NHWC, modelpb.ModelInput_FORMAT_NCHW:
			if len(in.GetDims()) != 3 {
				v.add(field+".format", "%s needs 3 dims, input %q has %d", f, in.GetName(), len(in.GetDims()))
			}
		default:
			v.add(field+".format", "unknown format %d", f)
		}
		if in.GetIsShapeTensor() {
			v.add(field+".is_shape_tensor", "shape tensors are a TensorRT feature; kiln does not support them")
		}
		if in.GetAllowRaggedBatch() {
			v.add(field+".allow_ragged_batch", "input %q: ragged batches are not implemented by kiln", in.GetName())
		}
	}
	seen = map[string]bool{}
	for i, out := range c.GetOutput() {
		field := fmt.Sprintf("output[%d]", i)
		v.tensor(field, out.GetName(), out.GetDataType(), out.GetDims(), out.GetReshape(), seen)
		if out.GetIsShapeTensor() {
			v.add(field+".is_shape_tensor", "shape tensors are a TensorRT feature; kiln does not support them")
		}
		if name := out.GetLabelFilename(); name != "" {
			v.fileName(field+".label_filename", name)
		}
	}

	if db := c.GetDynamicBatching(); db != nil {
		v.dynamicBatching(db, c.GetMaxBatchSize())
	}
	if sb := c.GetSequenceBatching(); sb != nil {
		v.sequenceBatching(sb, c.GetMaxBatchSize())
	}
	total := int64(0)
	for i, g := range c.GetInstanceGroup() {
		v.instanceGroup(fmt.Sprintf("instance_group[%d]", i), g)
		// a group places count instances on each GPU it lists
		total += int64(max(g.GetCount(), 1)) * int64(max(len(g.GetGpus()), 1))
	}
	if total > MaxInstances {
		v.add("instance_group", "%d instances in all: at most %d per model", total, MaxInstances)
	}
	for _, k := range slices.Sorted(maps.Keys(c.GetParameters())) {
		switch {
		case k == "":
			v.add("parameters", "a parameter has an empty key")
		case !slices.Contains(Parameters, k):
			v.add(fmt.Sprintf("parameters[%q]", k), "kiln does not implement this parameter (it implements %s)", strings.Join(Parameters, ", "))
		}
	}
	inputs := map[string]bool{}
	for _, in := range c.GetInput() {
		inputs[in.GetName()] = true
	}
	for name := range SequenceInputs(c) { // a warm-up sample gives the model every input
		inputs[name] = true
	}
	for i, w := range c.GetModelWarmup() {
		v.warmup(fmt.Sprintf("model_warmup[%d]", i), w, c.GetMaxBatchSize(), inputs)
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func validDataType(t modelpb.DataType) bool {
	_, known := modelpb.DataType_name[int32(t)]
	return known && t != modelpb.DataType_TYPE_INVALID
}

func (v *validator) versionPolicy(p *modelpb.ModelVersionPolicy) {
	switch choice := p.GetPolicyChoice().(type) {
	case nil:
		v.add("version_policy", "must set one of latest, all or specific")
	case *modelpb.ModelVersionPolicy_Latest_:
		if choice.Latest.GetNumVersions() < 1 {
			v.add("version_policy.latest.num_versions", "must be at least 1")
		}
	case *modelpb.ModelVersionPolicy_Specific_:
		vs := choice.Specific.GetVersions()
		if len(vs) == 0 {
			v.add("version_policy.specific.versions", "must list at least one version")
		}
		seen := map[int64]bool{}
		for i, n := range vs {
			field := fmt.Sprintf("version_policy.specific.versions[%d]", i)
			if n < 1 {
				v.add(field, "version %d: versions are positive integers", n)
			}
			if seen[n] {
				v.add(field, "version %d is listed twice", n)
			}
			seen[n] = true
		}
	}
}

// tensor checks what inputs and outputs have in common.
func (v *validator) tensor(field, name string, dt modelpb.DataType, dims []int64, reshape *modelpb.ModelTensorReshape, seen map[string]bool) {
	switch {
	case name == "":
		v.add(field+".name", "must be set")
	case seen[name]:
		v.add(field+".name", "%q is declared twice", name)
	}
	seen[name] = true
	if !validDataType(dt) {
		v.add(field+".data_type", "tensor %q: must be one of TYPE_BOOL ... TYPE_BF16, not %s", name, dt)
	}
	dimsOK := v.dims(field+".dims", name, dims)
	if reshape != nil && v.dims(field+".reshape.shape", name, reshape.GetShape()) && dimsOK {
		if !sameElements(dims, reshape.GetShape()) {
			v.add(field+".reshape", "tensor %q: shape %v does not hold the same elements as dims %v", name, reshape.GetShape(), dims)
		}
	}
}

// dims checks that every dimension is positive or -1 (variable).
func (v *validator) dims(field, name string, dims []int64) bool {
	ok := true
	for i, d := range dims {
		if d < 1 && d != -1 {
			v.add(fmt.Sprintf("%s[%d]", field, i), "tensor %q: %d is not a size; use a positive size or -1 for a variable one", name, d)
			ok = false
		}
	}
	return ok
}

// sameElements reports whether a reshape is consistent with dims, as Triton decides
// it: the runs of fixed dimensions between variable ones hold as many elements on
// both sides.
func sameElements(dims, shape []int64) bool {
	a, b := runs(dims), runs(shape)
	if a == nil || b == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runs returns the element counts of the runs of fixed dimensions separated by -1,
// or nil if a count overflows.
func runs(dims []int64) []int64 {
	out := []int64{1}
	for _, d := range dims {
		if d == -1 {
			out = append(out, 1)
			continue
		}
		last := &out[len(out)-1]
		if *last > math.MaxInt64/d {
			return nil
		}
		*last *= d
	}
	return out
}

func (v *validator) dynamicBatching(db *modelpb.ModelDynamicBatching, maxBatch int32) {
	if maxBatch <= 0 {
		v.add("dynamic_batching", "needs max_batch_size > 0: a model without a batch dimension cannot batch requests")
	}
	for i, n := range db.GetPreferredBatchSize() {
		field := fmt.Sprintf("dynamic_batching.preferred_batch_size[%d]", i)
		switch {
		case n <= 0:
			v.add(field, "%d: must be positive", n)
		case maxBatch > 0 && n > maxBatch:
			v.add(field, "%d is more than max_batch_size %d", n, maxBatch)
		}
	}
	if q := db.GetDefaultQueuePolicy(); q != nil {
		v.queuePolicy("dynamic_batching.default_queue_policy", q, db.GetPreserveOrdering())
	}
	levels := db.GetPriorityLevels()
	if levels > 0 && (db.GetDefaultPriorityLevel() < 1 || db.GetDefaultPriorityLevel() > levels) {
		v.add("dynamic_batching.default_priority_level", "%d is outside 1..%d (priority_levels)", db.GetDefaultPriorityLevel(), levels)
	}
	for _, level := range slices.Sorted(maps.Keys(db.GetPriorityQueuePolicy())) {
		field := fmt.Sprintf("dynamic_batching.priority_queue_policy[%d]", level)
		if level < 1 || level > levels {
			v.add(field, "priority level %d is outside 1..%d (priority_levels)", level, levels)
		}
		v.queuePolicy(field, db.GetPriorityQueuePolicy()[level], db.GetPreserveOrdering())
	}
}

// queuePolicy checks a queue policy of the dynamic batcher.
func (v *validator) queuePolicy(field string, q *modelpb.ModelQueuePolicy, preserveOrdering bool) {
	a := q.GetTimeoutAction()
	if _, ok := modelpb.ModelQueuePolicy_TimeoutAction_name[int32(a)]; !ok {
		v.add(field+".timeout_action", "unknown action %d", a)
	}
	if preserveOrdering && a == modelpb.ModelQueuePolicy_DELAY && q.GetDefaultTimeoutMicroseconds() != 0 {
		v.add(field+".timeout_action", "DELAY cannot be used with preserve_ordering")
	}
}

// MaxBatchSize bounds max_batch_size: the batcher's queues are sized from it, and a
// batch of more rows than this is far past what one execution can usefully take.
const MaxBatchSize = 1 << 16

// MaxWarmupCount bounds a warm-up sample's runs.
const MaxWarmupCount = 1000

// MaxInstances bounds a model's instances over all its instance groups: each is a slot
// that runs one request at a time with its own memory, and a count from a configuration
// (or the load API) must not make the server allocate without bound.
const MaxInstances = 1024

func (v *validator) instanceGroup(field string, g *modelpb.ModelInstanceGroup) {
	if g.GetCount() < 0 {
		v.add(field+".count", "%d: must be 0 (the default, 1) or positive", g.GetCount())
	}
	switch k := g.GetKind(); k {
	case modelpb.ModelInstanceGroup_KIND_AUTO, modelpb.ModelInstanceGroup_KIND_GPU:
	case modelpb.ModelInstanceGroup_KIND_CPU, modelpb.ModelInstanceGroup_KIND_MODEL:
		if len(g.GetGpus()) > 0 {
			v.add(field+".gpus", "a %s group cannot list GPUs", k)
		}
	default:
		v.add(field+".kind", "unknown kind %d", k)
	}
	for i, id := range g.GetGpus() {
		if id < 0 {
			v.add(fmt.Sprintf("%s.gpus[%d]", field, i), "%d is not a device ordinal", id)
		}
	}
}

func (v *validator) warmup(field string, w *modelpb.ModelWarmup, maxBatch int32, inputs map[string]bool) {
	if w.GetName() == "" {
		v.add(field+".name", "must be set")
	}
	if limit := max(int64(maxBatch), 1); int64(w.GetBatchSize()) > limit {
		v.add(field+".batch_size", "%d is more than the model's largest batch, %d", w.GetBatchSize(), limit)
	}
	if w.GetCount() > MaxWarmupCount {
		v.add(field+".count", "%d runs: at most %d (a model is not ready until its warm-up ends)", w.GetCount(), MaxWarmupCount)
	}
	if len(w.GetInputs()) == 0 && w.GetBatchSize() > 0 {
		v.add(field+".inputs", "must give at least one input")
	}
	for _, name := range slices.Sorted(maps.Keys(w.GetInputs())) {
		in := w.GetInputs()[name]
		f := fmt.Sprintf("%s.inputs[%q]", field, name)
		if name == "" {
			v.add(f, "an input has an empty name")
		} else if len(inputs) > 0 && !inputs[name] {
			v.add(f, "the model has no input %q", name)
		}
		if !validDataType(in.GetDataType()) {
			v.add(f+".data_type", "must be one of TYPE_BOOL ... TYPE_BF16, not %s", in.GetDataType())
		}
		for i, d := range in.GetDims() {
			if d < 0 {
				v.add(fmt.Sprintf("%s.dims[%d]", f, i), "%d: warm-up shapes must be concrete", d)
			}
		}
		switch src := in.GetInputDataType().(type) {
		case nil:
			v.add(f, "must set one of zero_data, random_data or input_data_file")
		case *modelpb.ModelWarmup_Input_InputDataFile:
			v.relativePath(f+".input_data_file", src.InputDataFile)
		}
	}
}

// fileName checks a file name that must name a file inside one directory.
func (v *validator) fileName(field, name string) {
	if !plainFileName(name) {
		v.add(field, "%q must be a file name, without a directory", name)
	}
}

// relativePath checks a slash-separated path that must stay inside a directory.
func (v *validator) relativePath(field, p string) {
	bad := p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00")
	for _, part := range strings.Split(p, "/") {
		bad = bad || part == ".."
	}
	if bad {
		v.add(field, "%q must be a relative path inside the model's warmup directory", p)
	}
}
