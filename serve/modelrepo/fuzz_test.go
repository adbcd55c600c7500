package modelrepo

import (
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// FuzzParseModelConfig checks that parsing never panics, that what it accepts is
// exactly what the protobuf decoder reads with unknown fields discarded (so blanking
// the ignored fields removed nothing else), that the field scanner splits every input
// the decoder accepts, and that validation and JSON rendering take any parsed config.
func FuzzParseModelConfig(f *testing.F) {
	f.Add([]byte(resnetConfig))
	for _, s := range []string{
		"",
		"name: \"m\" sequence_batching { oldest { max_candidate_sequences: 4 } }",
		"ensemble_scheduling < step [ < model_name: \"a\" > ] >; max_batch_size: 4",
		"foo: [1, 2.5e3, -inf, \"x\" 'y'] max_batch_size: 4",
		"max_batch_size: 4 mystery: -  # comment\n 12",
		"[some.ext # comment ]\n ] { a: 1 } max_batch_size: 4",
		"parameters [ { key: \"k\" value { string_value: \"v\\n\\x41\" } } ]",
		"input { name: \"x\" data_type: TYPE_FP33 }",
		"12: 5 4: 1",
		"version_policy { specific { versions: [1, 0x2, 03] } }",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, warnings, err := ParseModelConfig(data)
		lenient := &modelpb.ModelConfig{}
		lenientErr := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, lenient)
		if err != nil {
			if !errors.Is(err, ErrModelConfig) {
				t.Fatalf("error %v does not wrap ErrModelConfig", err)
			}
			return
		}
		if lenientErr != nil {
			t.Fatalf("accepted input the decoder rejects (%v)", lenientErr)
		}
		if !proto.Equal(c, lenient) {
			t.Fatalf("parsed config differs from the decoder's:\n%v\n%v", c, lenient)
		}
		if _, err := findUnknownFields(data, lenient.ProtoReflect().Descriptor()); err != nil {
			if _, nested := err.(*SyntaxError); !nested {
				t.Fatalf("scanner failed on input the decoder accepts: %v (warnings %q)", err, warnings)
			}
		}
		if err := ValidateModelConfig(c); err != nil && !errors.Is(err, ErrModelConfig) {
			t.Fatalf("validation error %v does not wrap ErrModelConfig", err)
		}
		js, err := ModelConfigJSON(c)
		if err != nil || !json.Valid(js) {
			t.Fatalf("JSON rendering: %v: %s", err, js)
		}
	})
}
