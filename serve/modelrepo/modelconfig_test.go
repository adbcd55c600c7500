package modelrepo

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// A config in the style Triton users write for an ONNX image classifier, including
// fields kiln does not transcribe (optimization, response_cache, a rate limiter inside
// an instance group, dynamic batching priorities).
const resnetConfig = `# ResNet-50 exported to ONNX
name: "resnet50"
platform: "onnxruntime_onnx"
max_batch_size: 32
version_policy: { latest: { num_versions: 2 } }
input [
  {
    name: "images"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  },
  {
    name: "features"
    data_type: TYPE_FP16
    dims: [ -1 ]
    reshape { shape: [ -1, 1 ] }
  }
]
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 500
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 100000 max_queue_size: 64 }
  priority_queue_policy { key: 1 value { timeout_action: DELAY default_timeout_microseconds: 2000 allow_timeout_override: true } }
}
instance_group [
  {
    count: 2
    kind: KIND_CPU
    rate_limiter { resources [ { name: "R1" count: 1 } ] }
  }
]
optimization {
  graph: { level: 1 }
  execution_accelerators {
    cpu_execution_accelerator: [ { name: "openvino" } ]
  }
}
response_cache { enable: true }
parameters { key: "intra_op_thread_count" value: { string_value: "4" } }
parameters [ { key: "cudnn_conv_algo_search" value: { string_value: "heuristic" } } ]
model_warmup [
  {
    name: "zeros"
    batch_size: 4
    count: 3
    inputs {
      key: "images"
      value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true }
    }
  }
]
`

func TestParseTritonConfig(t *testing.T) {
	c, warnings, err := ParseModelConfig([]byte(resnetConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.GetName() != "resnet50" || c.GetPlatform() != PlatformONNX || c.GetMaxBatchSize() != 32 {
		t.Errorf("header fields: %v", c)
	}
	if n := c.GetVersionPolicy().GetLatest().GetNumVersions(); n != 2 {
		t.Errorf("version_policy.latest.num_versions = %d", n)
	}
	in := c.GetInput()
	if len(in) != 1 || in[0].GetName() != "images" || in[0].GetDataType() != modelpb.DataType_TYPE_FP32 ||
		in[0].GetFormat() != modelpb.ModelInput_FORMAT_NCHW || !slices.Equal(in[0].GetDims(), []int64{3, 224, 224}) {
		t.Errorf("input: %v", in)
	}
	out := c.GetOutput()
	if len(out) != 2 || out[0].GetLabelFilename() != "labels.txt" || out[1].GetDataType() != modelpb.DataType_TYPE_FP16 ||
		!slices.Equal(out[1].GetReshape().GetShape(), []int64{-1, 1}) {
		t.Errorf("output: %v", out)
	}
	db := c.GetDynamicBatching()
	if !slices.Equal(db.GetPreferredBatchSize(), []int32{8, 16}) || db.GetMaxQueueDelayMicroseconds() != 500 ||
		db.GetDefaultQueuePolicy().GetMaxQueueSize() != 64 || db.GetDefaultQueuePolicy().GetDefaultTimeoutMicroseconds() != 100000 ||
		db.GetPriorityLevels() != 2 || db.GetDefaultPriorityLevel() != 2 ||
		db.GetPriorityQueuePolicy()[1].GetTimeoutAction() != modelpb.ModelQueuePolicy_DELAY || !db.GetPriorityQueuePolicy()[1].GetAllowTimeoutOverride() {
		t.Errorf("dynamic_batching: %v", db)
	}
	ig := c.GetInstanceGroup()
	if len(ig) != 1 || ig[0].GetCount() != 2 || ig[0].GetKind() != modelpb.ModelInstanceGroup_KIND_CPU {
		t.Errorf("instance_group: %v", ig)
	}
	if p := c.GetParameters(); len(p) != 2 || p["intra_op_thread_count"].GetStringValue() != "4" ||
		p["cudnn_conv_algo_search"].GetStringValue() != "heuristic" {
		t.Errorf("parameters: %v", p)
	}
	w := c.GetModelWarmup()
	if len(w) != 1 || w[0].GetBatchSize() != 4 || w[0].GetCount() != 3 || !w[0].GetInputs()["images"].GetZeroData() {
		t.Errorf("model_warmup: %v", w)
	}
	// What kiln transcribes but does not implement is refused by name.
	err = ValidateModelConfig(c)
	for _, field := range []string{`parameters["intra_op_thread_count"]:`, `parameters["cudnn_conv_algo_search"]:`} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("validate: %v does not refuse %s", err, field)
		}
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 2 {
		t.Errorf("validate: %d errors, want 2: %v", n, err)
	}

	// Each untranscribed field is named once, with its line, and nothing else is.
	want := map[string]string{
		"instance_group.rate_limiter": "(line 40:5)",
		"optimization":                "(line 43:1)",
		"response_cache":              "(line 49:1)",
	}
	if len(warnings) != len(want) {
		t.Errorf("warnings = %q, want %d", warnings, len(want))
	}
	for field, line := range want {
		found := false
		for _, w := range warnings {
			if strings.Contains(w, "field "+field+" ") && strings.Contains(w, line) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning for %s at %s in %q", field, line, warnings)
		}
	}
}

func TestParseIgnoredFieldForms(t *testing.T) {
	cases := []struct {
		name, text string
		ignored    []string
	}{
		{"empty message", "name: \"m\"\nensemble_scheduling {}\nmax_batch_size: 4", []string{"ensemble_scheduling"}},
		{"angle brackets", "ensemble_scheduling < step [ < model_name: \"a\" > ] >; max_batch_size: 4", []string{"ensemble_scheduling"}},
		{"scalar with comma", "runtime: \"model.py\", max_batch_size: 4", []string{"runtime"}},
		{"spaced negative", "max_batch_size: 4 mystery: -  # comment\n 12", []string{"mystery"}},
		{"list of scalars", "foo: [1, 2.5e3, -inf, \"x\" 'y'] max_batch_size: 4", []string{"foo"}},
		{"concatenated string", "foo: \"a\" 'b\\'}' \"c\"; max_batch_size: 4", []string{"foo"}},
		{"field number", "max_batch_size: 4\n12 { graph { level: 1 } }", []string{"12"}},
		{"extension name", "[some.ext # comment ]\n ] { a: 1 } max_batch_size: 4", []string{"[some.ext]"}},
		{"nested unknown", "input { name: \"x\" is_non_linear_format_io: true dims: 1 } max_batch_size: 4", []string{"input.is_non_linear_format_io"}},
		{"unknown in map value", "parameters { key: \"k\" value { string_value: \"v\" int_value: 3 } } max_batch_size: 4", []string{"parameters.int_value"}},
		{"unknown in oneof member", "version_policy { latest { num_versions: 1 newest: true } } max_batch_size: 4", []string{"version_policy.latest.newest"}},
		{"unknown enum in unknown field", "max_batch_size: 4 model_transaction_policy { decoupled: true kind: WHATEVER }", []string{"model_transaction_policy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := ParseModelConfig([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if c.GetMaxBatchSize() != 4 {
				t.Errorf("max_batch_size = %d; the known field was lost", c.GetMaxBatchSize())
			}
			if len(warnings) != len(tc.ignored) {
				t.Fatalf("warnings = %q, want %q", warnings, tc.ignored)
			}
			for i, w := range warnings {
				if !strings.HasPrefix(w, "field "+tc.ignored[i]+" (line ") {
					t.Errorf("warning %q does not name %s", w, tc.ignored[i])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, text string
		line, col  int
		msg        string
	}{
		{"missing brace", "name: \"m\"\ninput {\n  name: \"x\"\n", 4, 1, "end of input"},
		{"stray close", "name: \"m\"\n}\n", 2, 1, "invalid field name"},
		{"bad scalar", "name: \"m\"\nmax_batch_size: many\n", 2, 17, "invalid value"},
		{"unknown enum in known field", "input {\n  name: \"x\"\n  data_type: TYPE_FP33\n}\n", 3, 14, "TYPE_FP33"},
		{"unknown kind", "instance_group { kind: KIND_TPU }", 1, 24, "KIND_TPU"},
		{"oneof set twice", "version_policy { latest {} all {} }", 1, 28, "oneof"},
		{"repeated singular", "name: \"a\"\nname: \"b\"", 2, 1, "repeated"},
		{"missing colon", "name \"m\"", 1, 1, "separator"},
		{"field by number", "4: 8", 1, 1, "number"},
		{"unterminated string", "name: \"m", 1, 9, "end of input"},
		{"position after an ignored field", "optimization { graph { level: 1 } }, kiln: 1 max_batch_size: x", 1, 62, "invalid value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseModelConfig([]byte(tc.text))
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrModelConfig) {
				t.Fatalf("err = %v, want a *SyntaxError wrapping ErrModelConfig", err)
			}
			if se.Line != tc.line || se.Column != tc.col || !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", se.Line, se.Column, se.Msg, tc.line, tc.col, tc.msg)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("message %q has no line", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	big := make([]byte, MaxModelConfigBytes+1)
	for i := range big {
		big[i] = ' '
	}
	if _, _, err := ParseModelConfig(big); !errors.Is(err, ErrModelConfig) {
		t.Errorf("oversized input: err = %v", err)
	}
	deep := strings.Repeat("optimization { ", 40) + strings.Repeat("} ", 40)
	if _, _, err := ParseModelConfig([]byte(deep)); !errors.Is(err, ErrModelConfig) || !strings.Contains(err.Error(), "nested") {
		t.Errorf("deep nesting: err = %v", err)
	}
	many := strings.Repeat("foo: 1\n", maxWarnings+10) + "max_batch_size: 2"
	c, warnings, err := ParseModelConfig([]byte(many))
	if err != nil || c.GetMaxBatchSize() != 2 {
		t.Fatalf("many unknown fields: %v, %v", c, err)
	}
	if len(warnings) != maxWarnings+1 || !strings.Contains(warnings[maxWarnings], "10 more") {
		t.Errorf("warnings: %d, last %q", len(warnings), warnings[len(warnings)-1])
	}
	c, warnings, err = ParseModelConfig(nil)
	if err != nil || len(warnings) != 0 || !proto.Equal(c, &modelpb.ModelConfig{}) {
		t.Errorf("empty input: %v %v %v", c, warnings, err)
	}
}

func TestValidateModelConfig(t *testing.T) {
	base := func() *modelpb.ModelConfig {
		c, _, err := ParseModelConfig([]byte(resnetConfig))
		if err != nil {
			t.Fatal(err)
		}
		c.Parameters = map[string]*modelpb.ModelParameter{} // kiln implements neither
		c.GetDynamicBatching().DefaultQueuePolicy = &modelpb.ModelQueuePolicy{}
		return c
	}
	if err := ValidateModelConfig(base()); err != nil {
		t.Fatalf("base config: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(c *modelpb.ModelConfig)
		field string
	}{
		{"no name", func(c *modelpb.ModelConfig) { c.Name = "" }, "name"},
		{"tensorrt platform", func(c *modelpb.ModelConfig) { c.Platform = "tensorrt_plan" }, "platform"},
		{"python backend", func(c *modelpb.ModelConfig) { c.Backend = "python" }, "backend"},
		{"negative max_batch_size", func(c *modelpb.ModelConfig) { c.MaxBatchSize = -1; c.SchedulingChoice = nil }, "max_batch_size"},
		{"empty version policy", func(c *modelpb.ModelConfig) { c.VersionPolicy = &modelpb.ModelVersionPolicy{} }, "version_policy"},
		{"latest zero", func(c *modelpb.ModelConfig) {
			c.VersionPolicy.PolicyChoice = &modelpb.ModelVersionPolicy_Latest_{Latest: &modelpb.ModelVersionPolicy_Latest{}}
		}, "version_policy.latest.num_versions"},
		{"specific empty", func(c *modelpb.ModelConfig) {
			c.VersionPolicy.PolicyChoice = &modelpb.ModelVersionPolicy_Specific_{Specific: &modelpb.ModelVersionPolicy_Specific{}}
		}, "version_policy.specific.versions"},
		{"specific zero", func(c *modelpb.ModelConfig) {
			c.VersionPolicy.PolicyChoice = &modelpb.ModelVersionPolicy_Specific_{Specific: &modelpb.ModelVersionPolicy_Specific{Versions: []int64{1, 0}}}
		}, "version_policy.specific.versions[1]"},
		{"specific twice", func(c *modelpb.ModelConfig) {
			c.VersionPolicy.PolicyChoice = &modelpb.ModelVersionPolicy_Specific_{Specific: &modelpb.ModelVersionPolicy_Specific{Versions: []int64{3, 3}}}
		}, "version_policy.specific.versions[1]"},
		{"unnamed input", func(c *modelpb.ModelConfig) { c.Input[0].Name = "" }, "input[0].name"},
		{"duplicate output", func(c *modelpb.ModelConfig) { c.Output[1].Name = "logits" }, "output[1].name"},
		{"invalid data type", func(c *modelpb.ModelConfig) { c.Input[0].DataType = modelpb.DataType_TYPE_INVALID }, "input[0].data_type"},
		{"unknown data type", func(c *modelpb.ModelConfig) { c.Output[0].DataType = 99 }, "output[0].data_type"},
		{"zero dim", func(c *modelpb.ModelConfig) { c.Input[0].Dims = []int64{3, 0, 224} }, "input[0].dims[1]"},
		{"dim below -1", func(c *modelpb.ModelConfig) { c.Output[0].Dims = []int64{-2} }, "output[0].dims[0]"},
		{"reshape elements differ", func(c *modelpb.ModelConfig) {
			c.Output[0].Reshape = &modelpb.ModelTensorReshape{Shape: []int64{999}}
		}, "output[0].reshape"},
		{"reshape wildcards differ", func(c *modelpb.ModelConfig) { c.Output[1].Reshape.Shape = []int64{1, 2} }, "output[1].reshape"},
		{"reshape bad dim", func(c *modelpb.ModelConfig) { c.Output[1].Reshape.Shape = []int64{-1, 0} }, "output[1].reshape.shape[1]"},
		{"NCHW without 3 dims", func(c *modelpb.ModelConfig) { c.Input[0].Dims = []int64{150528} }, "input[0].format"},
		{"shape tensor", func(c *modelpb.ModelConfig) { c.Input[0].IsShapeTensor = true }, "input[0].is_shape_tensor"},
		{"label file path", func(c *modelpb.ModelConfig) { c.Output[0].LabelFilename = "../labels.txt" }, "output[0].label_filename"},
		{"model file path", func(c *modelpb.ModelConfig) { c.DefaultModelFilename = "/etc/passwd" }, "default_model_filename"},
		{"batching without batch dim", func(c *modelpb.ModelConfig) {
			c.MaxBatchSize = 0
			c.ModelWarmup[0].BatchSize = 1
			c.GetDynamicBatching().PreferredBatchSize = nil
		}, "dynamic_batching"},
		{"preferred size zero", func(c *modelpb.ModelConfig) { c.GetDynamicBatching().PreferredBatchSize = []int32{0} }, "dynamic_batching.preferred_batch_size[0]"},
		{"preferred size too large", func(c *modelpb.ModelConfig) { c.GetDynamicBatching().PreferredBatchSize = []int32{8, 64} }, "dynamic_batching.preferred_batch_size[1]"},
		{"ordering with delay", func(c *modelpb.ModelConfig) {
			c.GetDynamicBatching().PreserveOrdering = true
			c.GetDynamicBatching().DefaultQueuePolicy.TimeoutAction = modelpb.ModelQueuePolicy_DELAY
			c.GetDynamicBatching().DefaultQueuePolicy.DefaultTimeoutMicroseconds = 1000
		}, "dynamic_batching.default_queue_policy.timeout_action"},
		{"ordering with delay at a level", func(c *modelpb.ModelConfig) {
			c.GetDynamicBatching().PreserveOrdering = true
		}, "dynamic_batching.priority_queue_policy[1].timeout_action"},
		{"default priority past the levels", func(c *modelpb.ModelConfig) { c.GetDynamicBatching().DefaultPriorityLevel = 3 }, "dynamic_batching.default_priority_level"},
		{"default priority zero", func(c *modelpb.ModelConfig) { c.GetDynamicBatching().DefaultPriorityLevel = 0 }, "dynamic_batching.default_priority_level"},
		{"policy of a level past the levels", func(c *modelpb.ModelConfig) {
			c.GetDynamicBatching().PriorityQueuePolicy[5] = &modelpb.ModelQueuePolicy{}
		}, "dynamic_batching.priority_queue_policy[5]"},
		{"unknown timeout action", func(c *modelpb.ModelConfig) {
			c.GetDynamicBatching().DefaultQueuePolicy.TimeoutAction = 9
		}, "dynamic_batching.default_queue_policy.timeout_action"},
		{"ragged input", func(c *modelpb.ModelConfig) { c.Input[0].AllowRaggedBatch = true }, "input[0].allow_ragged_batch"},
		{"unimplemented parameter", func(c *modelpb.ModelConfig) {
			c.Parameters["execution_mode"] = &modelpb.ModelParameter{StringValue: "1"}
		}, `parameters["execution_mode"]`},
		{"negative count", func(c *modelpb.ModelConfig) { c.InstanceGroup[0].Count = -2 }, "instance_group[0].count"},
		{"huge max_batch_size", func(c *modelpb.ModelConfig) { c.MaxBatchSize = math.MaxInt32 }, "max_batch_size"},
		{"huge count", func(c *modelpb.ModelConfig) { c.InstanceGroup[0].Count = math.MaxInt32 }, "instance_group"},
		{"counts over the limit in all", func(c *modelpb.ModelConfig) {
			c.InstanceGroup[0].Count = 600
			c.InstanceGroup = append(c.InstanceGroup, &modelpb.ModelInstanceGroup{Count: 300, Kind: modelpb.ModelInstanceGroup_KIND_GPU, Gpus: []int32{0, 1}})
		}, "instance_group"},
		{"cpu group with gpus", func(c *modelpb.ModelConfig) { c.InstanceGroup[0].Gpus = []int32{0} }, "instance_group[0].gpus"},
		{"negative gpu", func(c *modelpb.ModelConfig) {
			c.InstanceGroup[0].Kind = modelpb.ModelInstanceGroup_KIND_GPU
			c.InstanceGroup[0].Gpus = []int32{-1}
		}, "instance_group[0].gpus[0]"},
		{"unknown kind", func(c *modelpb.ModelConfig) { c.InstanceGroup[0].Kind = 7 }, "instance_group[0].kind"},
		{"empty parameter key", func(c *modelpb.ModelConfig) { c.Parameters[""] = &modelpb.ModelParameter{} }, "parameters"},
		{"unnamed warmup", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Name = "" }, "model_warmup[0].name"},
		{"warmup batch too large", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].BatchSize = 33 }, "model_warmup[0].batch_size"},
		{"warmup runs without end", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Count = math.MaxUint32 }, "model_warmup[0].count"},
		{"warmup without inputs", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Inputs = nil }, "model_warmup[0].inputs"},
		{"warmup unknown input", func(c *modelpb.ModelConfig) {
			c.ModelWarmup[0].Inputs["image"] = c.ModelWarmup[0].Inputs["images"]
			delete(c.ModelWarmup[0].Inputs, "images")
		}, `model_warmup[0].inputs["image"]`},
		{"warmup wildcard dim", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Inputs["images"].Dims[0] = -1 }, `model_warmup[0].inputs["images"].dims[0]`},
		{"warmup invalid type", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Inputs["images"].DataType = 0 }, `model_warmup[0].inputs["images"].data_type`},
		{"warmup without data", func(c *modelpb.ModelConfig) { c.ModelWarmup[0].Inputs["images"].InputDataType = nil }, `model_warmup[0].inputs["images"]`},
		{"warmup file escapes", func(c *modelpb.ModelConfig) {
			c.ModelWarmup[0].Inputs["images"].InputDataType = &modelpb.ModelWarmup_Input_InputDataFile{InputDataFile: "a/../../x"}
		}, `model_warmup[0].inputs["images"].input_data_file`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(c)
			err := ValidateModelConfig(c)
			if !errors.Is(err, ErrModelConfig) {
				t.Fatalf("err = %v, want one wrapping ErrModelConfig", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("err = %v, want field %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("message %q does not name %s", err, tc.field)
			}
		})
	}

	// Valid corner cases: scalars, an empty reshape of a single element, and the
	// reshape Triton's documentation uses for variable dimensions.
	ok := []struct {
		name string
		edit func(c *modelpb.ModelConfig)
	}{
		{"scalar input", func(c *modelpb.ModelConfig) { c.Input[0].Dims = nil; c.Input[0].Format = 0 }},
		{"empty reshape", func(c *modelpb.ModelConfig) {
			c.Output[0].Dims = []int64{1}
			c.Output[0].Reshape = &modelpb.ModelTensorReshape{}
		}},
		{"wildcard runs", func(c *modelpb.ModelConfig) {
			c.Output[1].Dims = []int64{2, 4, -1, 6}
			c.Output[1].Reshape.Shape = []int64{8, -1, 1, 6}
		}},
		{"all versions", func(c *modelpb.ModelConfig) {
			c.VersionPolicy.PolicyChoice = &modelpb.ModelVersionPolicy_All_{All: &modelpb.ModelVersionPolicy_All{}}
		}},
		{"nothing stated", func(c *modelpb.ModelConfig) { *c = modelpb.ModelConfig{Name: "m"} }},
	}
	for _, tc := range ok {
		c := base()
		tc.edit(c)
		if err := ValidateModelConfig(c); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// Every violation is reported, not only the first.
	c := base()
	c.Input[0].Name = ""
	c.InstanceGroup[0].Count = -1
	if err := ValidateModelConfig(c); err == nil || !strings.Contains(err.Error(), "input[0].name") || !strings.Contains(err.Error(), "instance_group[0].count") {
		t.Errorf("two violations: %v", err)
	}
	if err := ValidateModelConfig(nil); !errors.Is(err, ErrModelConfig) {
		t.Errorf("nil config: %v", err)
	}
}

func TestModelConfigJSON(t *testing.T) {
	c, _, err := ParseModelConfig([]byte(resnetConfig))
	if err != nil {
		t.Fatal(err)
	}
	data, err := ModelConfigJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("invalid JSON: %s", data)
	}
	s := string(data)
	for _, want := range []string{
		`{"name":"resnet50","platform":"onnxruntime_onnx","backend":"","version_policy":{"latest":{"num_versions":2}},"max_batch_size":32,`,
		`"input":[{"name":"images","data_type":"TYPE_FP32","format":"FORMAT_NCHW","dims":[3,224,224],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false}]`,
		`"reshape":{"shape":[-1,1]}`,
		`"dynamic_batching":{"preferred_batch_size":[8,16],"max_queue_delay_microseconds":500,"preserve_ordering":false,"priority_levels":2,"default_priority_level":2,` +
			`"default_queue_policy":{"timeout_action":"REJECT","default_timeout_microseconds":100000,"allow_timeout_override":false,"max_queue_size":64},` +
			`"priority_queue_policy":{"1":{"timeout_action":"DELAY","default_timeout_microseconds":2000,"allow_timeout_override":true,"max_queue_size":0}}}`,
		`"instance_group":[{"name":"","kind":"KIND_CPU","count":2,"gpus":[]}]`,
		`"default_model_filename":""`,
		`"parameters":{"cudnn_conv_algo_search":{"string_value":"heuristic"},"intra_op_thread_count":{"string_value":"4"}}`,
		`"model_warmup":[{"name":"zeros","batch_size":4,"inputs":{"images":{"data_type":"TYPE_FP32","dims":[3,224,224],"zero_data":true}},"count":3}]}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON lacks %s\nin %s", want, s)
		}
	}

	// The JSON holds the same config: protojson (which accepts numbers for 64-bit
	// fields) reads it back to an equal message.
	var back modelpb.ModelConfig
	if err := protojson.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(c, &back) {
		t.Errorf("round trip differs:\n%v\n%v", prototext.Format(c), prototext.Format(&back))
	}

	// Unset messages and oneofs are left out; empty lists and maps are present.
	data, _ = ModelConfigJSON(&modelpb.ModelConfig{Name: "m"})
	want := `{"name":"m","platform":"","backend":"","max_batch_size":0,"input":[],"output":[],"instance_group":[],"default_model_filename":"","parameters":{},"model_warmup":[]}`
	if string(data) != want {
		t.Errorf("empty config:\n got %s\nwant %s", data, want)
	}
	if _, err := ModelConfigJSON(nil); err == nil {
		t.Error("nil config rendered")
	}
}

func TestDataTypeOIP(t *testing.T) {
	want := map[modelpb.DataType]string{
		modelpb.DataType_TYPE_BOOL: "BOOL", modelpb.DataType_TYPE_UINT8: "UINT8", modelpb.DataType_TYPE_UINT16: "UINT16",
		modelpb.DataType_TYPE_UINT32: "UINT32", modelpb.DataType_TYPE_UINT64: "UINT64", modelpb.DataType_TYPE_INT8: "INT8",
		modelpb.DataType_TYPE_INT16: "INT16", modelpb.DataType_TYPE_INT32: "INT32", modelpb.DataType_TYPE_INT64: "INT64",
		modelpb.DataType_TYPE_FP16: "FP16", modelpb.DataType_TYPE_FP32: "FP32", modelpb.DataType_TYPE_FP64: "FP64",
		modelpb.DataType_TYPE_STRING: "BYTES", modelpb.DataType_TYPE_BF16: "BF16",
	}
	// Every enum value but TYPE_INVALID has a protocol name, and back.
	for num := range modelpb.DataType_name {
		dt := modelpb.DataType(num)
		s, ok := DataTypeToOIP(dt)
		if dt == modelpb.DataType_TYPE_INVALID {
			if ok {
				t.Errorf("TYPE_INVALID maps to %q", s)
			}
			continue
		}
		if !ok || s != want[dt] {
			t.Errorf("DataTypeToOIP(%s) = %q, %v; want %q", dt, s, ok, want[dt])
		}
		back, ok := DataTypeFromOIP(s)
		if !ok || back != dt {
			t.Errorf("DataTypeFromOIP(%q) = %s, %v; want %s", s, back, ok, dt)
		}
	}
	if len(want) != len(modelpb.DataType_name)-1 {
		t.Errorf("the table covers %d types, the enum has %d", len(want), len(modelpb.DataType_name)-1)
	}
	for _, s := range []string{"", "fp32", "STRING", "FLOAT", "TYPE_FP32"} {
		if dt, ok := DataTypeFromOIP(s); ok || dt != modelpb.DataType_TYPE_INVALID {
			t.Errorf("DataTypeFromOIP(%q) = %s, %v", s, dt, ok)
		}
	}
	if _, ok := DataTypeToOIP(99); ok {
		t.Error("unknown enum value mapped")
	}
}

// TestOneDatatypeTable: the element type of every protocol datatype and the config
// data type of every element type come from the same row, so a request, a response
// and config.pbtxt agree on every type.
func TestOneDatatypeTable(t *testing.T) {
	want := map[string]tensor.DType{
		"BOOL": tensor.Bool, "UINT8": tensor.Uint8, "UINT16": tensor.Uint16, "UINT32": tensor.Uint32, "UINT64": tensor.Uint64,
		"INT8": tensor.Int8, "INT16": tensor.Int16, "INT32": tensor.Int32, "INT64": tensor.Int64,
		"FP16": tensor.Float16, "FP32": tensor.Float32, "FP64": tensor.Float64, "BYTES": tensor.String, "BF16": tensor.BFloat16,
	}
	names := OIPDatatypes()
	if len(names) != len(want) || !slices.IsSorted(names) {
		t.Fatalf("OIPDatatypes() = %v", names)
	}
	for _, s := range names {
		dt, ok := DTypeFromOIP(s)
		if !ok || dt != want[s] {
			t.Errorf("DTypeFromOIP(%q) = %v, %v; want %v", s, dt, ok, want[s])
		}
		if back := DTypeToOIP(dt); back != s {
			t.Errorf("DTypeToOIP(%v) = %q, want %q", dt, back, s)
		}
		if _, ok := DataTypeFromOIP(s); !ok {
			t.Errorf("%q has no config data type", s)
		}
	}
	for _, dt := range []tensor.DType{tensor.Undefined, tensor.Complex64, tensor.Complex128} {
		if s := DTypeToOIP(dt); s != "" {
			t.Errorf("DTypeToOIP(%v) = %q, want none", dt, s)
		}
	}
	if dt, ok := DTypeFromOIP("fp32"); ok || dt != tensor.Undefined {
		t.Errorf("DTypeFromOIP(fp32) = %v, %v", dt, ok)
	}
}
