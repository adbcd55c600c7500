package modelrepo

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestModelConfigJSONParsesBack(t *testing.T) {
	c, _, err := ParseModelConfig([]byte(resnetConfig))
	if err != nil {
		t.Fatal(err)
	}
	js, err := ModelConfigJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseModelConfigJSON(js)
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if !proto.Equal(back, c) {
		t.Errorf("round trip changed the config:\n%v\n%v", back, c)
	}
}

func TestModelConfigJSONErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"max_batch_size": 4`, "unexpected end"},
		{`{"max_batch_size": "four"}`, "line 1:20"},
		{`{"optimization": {"graph": {"level": 1}}}`, `unknown field "optimization"`},
		{`{"input": [{"name": "x", "data_type": "TYPE_FLOAT"}]}`, "TYPE_FLOAT"},
		{`not json`, "line 1:1"},
	} {
		_, err := ParseModelConfigJSON([]byte(tc.json))
		if !errors.Is(err, ErrModelConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", tc.json, err, tc.want)
		}
	}
}
