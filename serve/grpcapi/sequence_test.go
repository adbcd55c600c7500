package grpcapi

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// stepX is step k's input of sequence i.
func stepX(i, k int) []float32 {
	x := make([]float32, servetest.StatefulWidth)
	for j := range x {
		x[j] = float32(math.Cos(float64(i)*0.9+float64(k)*0.4+float64(j))) * 0.7
	}
	return x
}

// TestSequencesOverGRPCAndRESTMatchTheRecurrence: four sequences of 20 steps sent at
// once to the stateful model, two over gRPC (a uint64 and a string correlation ID in
// InferParameter) and two over REST (a JSON number beyond 2^53 and a string), each
// get the state recurrence's answers; a request continuing an unknown sequence is
// refused with Triton's words on both protocols.
func TestSequencesOverGRPCAndRESTMatchTheRecurrence(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteStatefulRepo(repo); err != nil {
		t.Fatal(err)
	}
	f := startWith(t, serve.Options{Repository: repo}, Options{})
	const steps = 20
	grpcStep := func(id *pb.InferParameter, start, end bool, x []float32) ([]float32, error) {
		params := map[string]*pb.InferParameter{"sequence_id": id,
			"sequence_start": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: start}},
			"sequence_end":   {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: end}}}
		resp, err := f.client.ModelInfer(ctx(t), &pb.ModelInferRequest{ModelName: "stateful", Parameters: params,
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, servetest.StatefulWidth}}},
			RawInputContents: [][]byte{f32bytes(x)}})
		if err != nil {
			return nil, err
		}
		if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "y" {
			return nil, fmt.Errorf("outputs %v, want y alone", resp.Outputs)
		}
		return bytesF32(resp.RawOutputContents[0]), nil
	}
	restStep := func(id string, start, end bool, x []float32) ([]float32, error) {
		body := fmt.Sprintf(`{"parameters":{"sequence_id":%s,"sequence_start":%t,"sequence_end":%t},"inputs":[{"name":"x","datatype":"FP32","shape":[1,%d],"data":%s}]}`,
			id, start, end, servetest.StatefulWidth, mustJSON(x))
		resp, err := http.Post(f.rest+"/v2/models/stateful/infer", "application/json", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		var out struct {
			Outputs []struct {
				Name string    `json:"name"`
				Data []float32 `json:"data"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Outputs) != 1 || out.Outputs[0].Name != "y" {
			return nil, fmt.Errorf("response %s: want the output y alone", b)
		}
		return out.Outputs[0].Data, nil
	}
	sends := []func(start, end bool, x []float32) ([]float32, error){
		func(s, e bool, x []float32) ([]float32, error) {
			return grpcStep(&pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: math.MaxUint64}}, s, e, x)
		},
		func(s, e bool, x []float32) ([]float32, error) {
			return grpcStep(&pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: "grpc-seq"}}, s, e, x)
		},
		func(s, e bool, x []float32) ([]float32, error) { return restStep("18446744073709551614", s, e, x) },
		func(s, e bool, x []float32) ([]float32, error) { return restStep(`"rest-seq"`, s, e, x) },
	}
	var wg sync.WaitGroup
	for i, send := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state := make([]float32, servetest.StatefulWidth)
			for k := range steps {
				x := stepX(i, k)
				var want []float32
				state, want = servetest.StatefulStep(state, x)
				got, err := send(k == 0, k == steps-1, x)
				if err != nil {
					t.Errorf("sequence %d step %d: %v", i, k, err)
					return
				}
				for j := range want {
					if math.Abs(float64(got[j]-want[j])) > 1e-6 {
						t.Errorf("sequence %d step %d: %v, want %v", i, k, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()

	const triton = "must specify the START flag on the first request of the sequence"
	_, err := grpcStep(&pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: 77}}, false, false, stepX(0, 0))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "sequence 77 to model 'stateful' "+triton) {
		t.Errorf("gRPC, sequence never started: %v, want INVALID_ARGUMENT with Triton's text", err)
	}
	if _, err := restStep("78", false, false, stepX(0, 0)); err == nil || !strings.Contains(err.Error(), "status 400") || !strings.Contains(err.Error(), "sequence 78 to model 'stateful' "+triton) {
		t.Errorf("REST, sequence never started: %v, want 400 with Triton's text", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
