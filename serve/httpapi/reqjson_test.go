package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/kilnrt/kiln/serve"
)

// headerSeeds are inference request headers, valid and not.
var headerSeeds = []string{
	`{"id":"a","inputs":[{"name":"x","datatype":"FP32","shape":[3,8],"parameters":{"binary_data_size":96}}],"outputs":[{"name":"probs","parameters":{"binary_data":true}}],"parameters":{"binary_data_output":true}}`,
	`{"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3.5e-1,-4]]}]}`,
	`{"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"data":["a\u00e9\n","\"b\\"]}]}`,
	`{"parameters":{"sequence_id":18446744073709551615,"sequence_start":true,"priority":2,"timeout":1.5e3},"inputs":[]}`,
	`{"parameters":{"sequence_id":"corr-7"},"inputs":null,"outputs":[null]}`,
	`{"INPUTS":[{"Name":"x","SHAPE":[1],"data":null}],"Id":"b","extra":{"deep":[[[]]]}}`,
	`{"inputs":[{"name":"x","shape":[null,1]}]}`,
	`{"inputs":[{"name":"x","shape":[1.5]}]}`,
	`{"inputs":[{"name":"x","shape":[99999999999999999999]}]}`,
	`{"parameters":{"n":1e400}}`,
	`{"inputs":3}`, `{"inputs":[3]}`, `{"id":5}`, `[]`, `null`, `"x"`, `{}`, ``, `{"inputs":[`,
	`{"a":NaN}`, `{"a":"\x"}`, `{"a":01}`, `{} {}`, `{"a":"` + "\x01" + `"}`,
	strings.Repeat(`[`, 400) + strings.Repeat(`]`, 400),
}

// TestDecodeHeaderMatchesEncodingJSON: the seeds decode as encoding/json decodes them
// (decodeLargeHeader), or both refuse them.
func TestDecodeHeaderMatchesEncodingJSON(t *testing.T) {
	for _, s := range headerSeeds {
		compareHeaderDecoders(t, []byte(s))
	}
}

func TestDecodeHeaderNamesWhereTheFormIsWrong(t *testing.T) {
	for head, want := range map[string]string{
		`{"inputs":3}`: "inputs: value doesn't contain array; it contains number",
		`{"inputs":[{"name":"x","shape":[3,"8"]}]}`:          "inputs[0].shape[1]: string, not an integer",
		`{"outputs":[{},{"parameters":{"a":[1,2e999]}}]}`:    "outputs[1].parameters.a: the number 2e999 does not fit a float64",
		`{"inputs":[{"name":"x","datatype":7}]}`:             "inputs[0].datatype: value doesn't contain string; it contains number",
		`{"inputs":[{"name":"x","shape":[1]}]} {"inputs":3}`: "not valid JSON",
		// past fastHeaderMax, through encoding/json: the same form of message
		`{"inputs":[{"name":"x","shape":"3"}],"pad":"` + strings.Repeat("x", fastHeaderMax) + `"}`: "inputs.shape: string, not an array",
	} {
		_, err := decodeHeader([]byte(head))
		if !errors.Is(err, serve.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want ErrInvalid naming %q", head, err, want)
		}
	}
}

// FuzzDecodeHeader: decodeHeader never panics, and on JSON inside the domain where
// the two are meant to agree (valid UTF-8, no repeated key, no lone surrogate escape)
// it decodes what encoding/json decodes, or refuses what encoding/json refuses.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range headerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		if len(head) > fastHeaderMax {
			return
		}
		compareHeaderDecoders(t, head)
	})
}

func compareHeaderDecoders(t *testing.T, head []byte) {
	t.Helper()
	got, err := decodeHeader(head)
	if err != nil && !errors.Is(err, serve.ErrInvalid) {
		t.Fatalf("%q: %v is not ErrInvalid", head, err)
	}
	if !json.Valid(head) || !utf8.Valid(head) || bytes.Contains(head, []byte(`\u`)) || repeatsAKey(head) {
		return
	}
	want, wantErr := decodeLargeHeader(head)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("%q: fastjson: %v; encoding/json: %v", head, err, wantErr)
	case err != nil:
		return
	}
	for i := range got.Inputs {
		if !sameJSON(got.Inputs[i].Data, want.Inputs[i].Data) {
			t.Fatalf("%q: input %d's data %s; encoding/json: %s", head, i, got.Inputs[i].Data, want.Inputs[i].Data)
		}
		got.Inputs[i].Data, want.Inputs[i].Data = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nfastjson      %#v\nencoding/json %#v", head, got, want)
	}
}

// sameJSON: a and b are both absent or the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	decode := func(r json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return err.Error()
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// repeatsAKey: some object in the JSON text has two members of the same name, or of
// names equal without regard to case.
func repeatsAKey(head []byte) bool {
	v, err := fastjson.ParseBytes(head)
	if err != nil {
		return false
	}
	var walk func(v *fastjson.Value) bool
	walk = func(v *fastjson.Value) bool {
		switch v.Type() {
		case fastjson.TypeArray:
			for _, e := range v.GetArray() {
				if walk(e) {
					return true
				}
			}
		case fastjson.TypeObject:
			seen, repeated := map[string]bool{}, false
			v.GetObject().Visit(func(k []byte, v *fastjson.Value) {
				key := strings.ToLower(string(k))
				repeated = repeated || seen[key] || walk(v)
				seen[key] = true
			})
			return repeated
		}
		return false
	}
	return walk(v)
}
