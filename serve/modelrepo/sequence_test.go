package modelrepo

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateSequenceBatching: a complete sequence_batching config is valid, and each
// broken or unimplemented part is refused naming its field.
func TestValidateSequenceBatching(t *testing.T) {
	const valid = `name: "m"
max_batch_size: 4
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 8 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "h_in" output_name: "h_out" data_type: TYPE_FP32 dims: [ 16 ]
            initial_state { data_type: TYPE_FP32 dims: [ 16 ] data_file: "h0.bin" name: "h0" } } ]
}
`
	check := func(text string) error {
		t.Helper()
		c, unimplemented, err := ParseModelConfig([]byte(text))
		if err != nil || len(unimplemented) > 0 {
			t.Fatalf("parse: %v %v", err, unimplemented)
		}
		return ValidateModelConfig(c)
	}
	if err := check(valid); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	c, _, _ := ParseModelConfig([]byte(valid))
	js, err := ModelConfigJSON(c)
	if err != nil || !strings.Contains(string(js), `"max_queue_delay_microseconds":100,"preserve_ordering":false},"max_sequence_idle_microseconds":5000000,`) ||
		!strings.Contains(string(js), `"kind":"CONTROL_SEQUENCE_CORRID"`) {
		t.Errorf("config JSON: %v %s, want sequence_batching rendered as Triton does", err, js)
	}
	for _, c := range []struct{ name, from, to, field string }{
		{"two false/true lists", "fp32_false_true: [ 0, 1 ]", "fp32_false_true: [ 0, 1 ] int32_false_true: [ 0, 1 ]", "sequence_batching.control_input[0].control[0]"},
		{"one value", "fp32_false_true: [ 0, 1 ]", "fp32_false_true: [ 1 ]", "sequence_batching.control_input[0].control[0]"},
		{"CORRID of floats", "data_type: TYPE_UINT64", "data_type: TYPE_FP32", "sequence_batching.control_input[1].control[0].data_type"},
		{"control twice", `name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ]`, `name: "START2" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ]`, "sequence_batching.control_input[1].control[0].kind"},
		{"state on a control input", `input_name: "h_in"`, `input_name: "START"`, "sequence_batching.state[0].input_name"},
		{"initial state of another type", "initial_state { data_type: TYPE_FP32", "initial_state { data_type: TYPE_INT32", "sequence_batching.state[0].initial_state[0].data_type"},
		{"initial state file outside", `data_file: "h0.bin"`, `data_file: "../h0.bin"`, "sequence_batching.state[0].initial_state[0].data_file"},
		{"free dim without initial state", `dims: [ 16 ]
            initial_state { data_type: TYPE_FP32 dims: [ 16 ] data_file: "h0.bin" name: "h0" }`, "dims: [ -1 ]", "sequence_batching.state[0].dims"},
		{"growable memory", "data_type: TYPE_FP32 dims: [ 16 ]\n", "data_type: TYPE_FP32 dims: [ 16 ] use_growable_memory: true\n", "sequence_batching.state[0].use_growable_memory"},
		{"iterative", "max_sequence_idle_microseconds: 5000000", "max_sequence_idle_microseconds: 5000000 iterative_sequence: true", "sequence_batching.iterative_sequence"},
		{"preferred above max", "preferred_batch_size: [ 2, 4 ]", "preferred_batch_size: [ 2, 8 ]", "sequence_batching.oldest.preferred_batch_size[1]"},
		{"slot utilization above 1", "oldest { max_candidate_sequences: 8 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }", "direct { minimum_slot_utilization: 1.5 }", "sequence_batching.direct.minimum_slot_utilization"},
	} {
		text := strings.Replace(valid, c.from, c.to, 1)
		if text == valid {
			t.Fatalf("%s: the edit did not apply", c.name)
		}
		err := check(text)
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("%s: %v, want a FieldError naming %s", c.name, err, c.field)
		}
	}
}
