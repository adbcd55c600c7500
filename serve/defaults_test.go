package serve

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

func addbRequest(inputs ...string) *InferRequest {
	req := &InferRequest{Model: "addb"}
	for _, name := range inputs {
		v := []float32{1, 2}
		if name == "b" {
			v = []float32{-1, 5}
		}
		req.Inputs = append(req.Inputs, Tensor{Name: name, Datatype: "FP32", Shape: []int64{2}, Data: tensor.MustFromSlice(tensor.Shape{2}, v)})
	}
	return req
}

// TestOmittedOptionalInputTakesTheModelsDefault: an input with a default (an
// initializer) is optional in the completed config; a request that omits it runs with
// the default, one that gives it with its value; omitting the input without a default
// is an error naming it.
func TestOmittedOptionalInputTakesTheModelsDefault(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteDefaultsRepo(repo, 8); err != nil {
		t.Fatal(err)
	}
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	c, err := s.ModelConfig("addb", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Input) != 2 || c.Input[0].Optional || c.Input[1].GetName() != "b" || !c.Input[1].Optional {
		t.Fatalf("config inputs %v: want x, and b optional", c.Input)
	}
	for _, tc := range []struct {
		inputs []string
		want   []float32
	}{{[]string{"x"}, []float32{11, 22}}, {[]string{"x", "b"}, []float32{0, 7}}, {[]string{"b", "x"}, []float32{0, 7}}} {
		resp, err := s.Infer(context.Background(), addbRequest(tc.inputs...))
		if err != nil {
			t.Fatalf("inputs %v: %v", tc.inputs, err)
		}
		if got := resp.Outputs[0].Data.Data.([]float32); got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("inputs %v: y = %v, want %v", tc.inputs, got, tc.want)
		}
	}
	_, err = s.Infer(context.Background(), addbRequest("b"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("a request without x: %v, want ErrInvalid naming x", err)
	}
}

// TestConfigOptionalNeedsADefault: config.pbtxt may mark optional an input the model
// has a default for, not one it cannot run without; a config that marks b required
// (optional: false) makes a request without b an error naming it.
func TestConfigOptionalNeedsADefault(t *testing.T) {
	const inputs = `name: "addb"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] optional: %s }, { name: "b" data_type: TYPE_FP32 dims: [ 2 ] optional: %s } ]
`
	for _, tc := range []struct {
		x, b  string
		ready bool
		omitB bool // a request may omit b
	}{{"false", "true", true, true}, {"true", "true", false, false}, {"false", "false", true, false}} {
		repo := t.TempDir()
		if err := servetest.WriteDefaultsRepo(repo, 8); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, repo, "addb", fmtInputs(inputs, tc.x, tc.b))
		s, _ := openOnDevices(t, repo, &servetest.Engine{})
		_, err := s.ModelMetadata("addb", "")
		if (err == nil) != tc.ready {
			t.Errorf("x optional %s, b optional %s: metadata error %v, want ready %v", tc.x, tc.b, err, tc.ready)
			continue
		}
		if !tc.ready {
			if !strings.Contains(err.Error(), `"x" is optional`) {
				t.Errorf("x optional: %v, want the reason naming x", err)
			}
			continue
		}
		_, err = s.Infer(context.Background(), addbRequest("x"))
		if (err == nil) != tc.omitB || (err != nil && !strings.Contains(err.Error(), `"b"`)) {
			t.Errorf("b optional %s: a request without b: %v", tc.b, err)
		}
	}
}

func fmtInputs(format, x, b string) string {
	return strings.Replace(strings.Replace(format, "%s", x, 1), "%s", b, 1)
}

// TestConfigCannotMakeAnIRVersion3ConstantOptional: in a model of IR version 3 every
// initializer is listed as a graph input and is a constant (folded like a weight), so
// the completed config has x alone, and a config listing b, optional or not, is
// refused with the reason.
func TestConfigCannotMakeAnIRVersion3ConstantOptional(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteDefaultsRepo(repo, 3); err != nil {
		t.Fatal(err)
	}
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	c, err := s.ModelConfig("addb", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Input) != 1 || c.Input[0].GetName() != "x" {
		t.Fatalf("config inputs %v: want x alone", c.Input)
	}
	writeConfig(t, repo, "addb", fmtInputs(`name: "addb"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] optional: %s }, { name: "b" data_type: TYPE_FP32 dims: [ 2 ] optional: %s } ]
`, "false", "true"))
	s, _ = openOnDevices(t, repo, &servetest.Engine{})
	if _, err := s.ModelMetadata("addb", ""); err == nil || !strings.Contains(err.Error(), "IR version is below 4") {
		t.Errorf("b optional in an IR 3 model: %v, want the model refused with the reason", err)
	}
}
