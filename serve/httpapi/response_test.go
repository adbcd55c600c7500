package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/kilnrt/kiln/serve"
)

// TestResponseHeadIsTheMapEncoding: the typed response head encodes byte for byte as
// the same fields in a map (keys sorted), for outputs as JSON data, as binary data and
// in shared memory, with and without a request id.
func TestResponseHeadIsTheMapEncoding(t *testing.T) {
	ref := &serve.SharedMemoryRef{Region: "r<1>", Offset: 64, ByteSize: 48}
	for _, id := range []string{"", "req-7&<x>"} {
		typed := jsonResponse{ID: id, Model: "m", Version: "2", Outputs: []jsonOutput{
			{Name: "probs", Datatype: "FP32", Shape: []int64{3, 4}, Data: json.RawMessage(`[0.5,1]`)},
			{Name: "ids", Datatype: "INT64", Shape: []int64{2}, Parameters: binaryDataSize{16}},
			{Name: "out", Datatype: "FP32", Shape: []int64{}, Parameters: shmParams(ref)},
		}}
		mapped := gin.H{"model_name": "m", "model_version": "2", "outputs": []gin.H{
			{"name": "probs", "datatype": "FP32", "shape": []int64{3, 4}, "data": json.RawMessage(`[0.5,1]`)},
			{"name": "ids", "datatype": "INT64", "shape": []int64{2}, "parameters": gin.H{"binary_data_size": 16}},
			{"name": "out", "datatype": "FP32", "shape": []int64{}, "parameters": shmParams(ref)},
		}}
		if id != "" {
			mapped["id"] = id
		}
		got, err := json.Marshal(&typed)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(mapped)
		if string(got) != string(want) {
			t.Errorf("typed head\n%s\nwant the map's\n%s", got, want)
		}
	}
}
