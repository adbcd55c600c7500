package grpcapi

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/internal/testdata"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

func shmParam(region string, offset, size int64) map[string]*pb.InferParameter {
	return map[string]*pb.InferParameter{
		"shared_memory_region":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: region}},
		"shared_memory_offset":    {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: offset}},
		"shared_memory_byte_size": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: size}},
	}
}

// shmRequest is the MLP's request with x read from region at 0 and probs written to
// it at outAt (room for room bytes).
func shmRequest(region string, outAt, room int64) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "mlp",
		Inputs:  []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}, Parameters: shmParam(region, 0, 96)}},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "probs", Parameters: shmParam(region, outAt, room)}}}
}

// TestSystemSharedMemoryOverGRPC: register, an inference with its input and output in
// the region equal to the plain request's (the output not in the response), status,
// unregister; the server metadata lists the extension.
func TestSystemSharedMemoryOverGRPC(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	key, path := testdata.SharedMemoryObject(t, 4096)
	obj := make([]byte, 4096)
	copy(obj[256:], f32bytes(x))
	os.WriteFile(path, obj, 0o600)
	if _, err := f.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "io", Key: key, Offset: 256, ByteSize: 2048}); err != nil {
		t.Fatal(err)
	}
	plain, err := f.client.ModelInfer(c, rawRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := bytesF32(plain.RawOutputContents[0])
	checkProbs(t, want)

	resp, err := f.client.ModelInfer(c, shmRequest("io", 1024, 64))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 1 || len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 0 ||
		resp.Outputs[0].Parameters["shared_memory_region"].GetStringParam() != "io" || resp.Outputs[0].Parameters["shared_memory_byte_size"].GetInt64Param() != 48 {
		t.Fatalf("response %v", resp)
	}
	obj, _ = os.ReadFile(path)
	got := bytesF32(obj[256+1024 : 256+1024+48])
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("probs[%d] in shared memory %v, plain request %v", i, got[i], want[i])
		}
	}
	// raw_input_contents holds the inputs not in shared memory only
	bad := shmRequest("io", 1024, 64)
	bad.RawInputContents = [][]byte{f32bytes(x)}
	if _, err := f.client.ModelInfer(c, bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("raw contents for an input in shared memory: %v", err)
	}

	st, err := f.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{})
	if r := st.GetRegions()["io"]; err != nil || len(st.Regions) != 1 || r.Key != key || r.Offset != 256 || r.ByteSize != 2048 || r.Name != "io" {
		t.Fatalf("status %v %v", st, err)
	}
	md, _ := f.client.ServerMetadata(c, &pb.ServerMetadataRequest{})
	if !strings.Contains(strings.Join(md.GetExtensions(), ","), "system_shared_memory") {
		t.Fatalf("extensions %v", md.GetExtensions())
	}
	if _, err := f.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: "io"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: "io"}); status.Code(err) != codes.NotFound {
		t.Fatalf("status of an unregistered region: %v", err)
	}
	if _, err := f.client.ModelInfer(c, shmRequest("io", 1024, 64)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "io"`) {
		t.Fatalf("inference on an unregistered region: %v", err)
	}
}

// TestHostileSharedMemoryOverGRPC: hostile keys, a symlink out of /dev/shm, a FIFO,
// a region larger than its object, an output larger than its place and a truncated
// object answer INVALID_ARGUMENT naming the region, and the server keeps serving.
func TestHostileSharedMemoryOverGRPC(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	hostile, outside := testdata.HostileSharedMemory(t)
	before, _ := os.ReadFile(outside)
	for _, key := range []string{"../etc", "a/b", "", "x\x00y", hostile["symlink"], hostile["fifo"]} {
		_, err := f.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "bad", Key: key, ByteSize: 16})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "bad"`) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	small, _ := testdata.SharedMemoryObject(t, 128)
	if _, err := f.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "small", Key: small, Offset: 64, ByteSize: 128}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "small"`) {
		t.Errorf("a region past its object: %v", err)
	}
	if _, err := f.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "small", Key: small, ByteSize: 128}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.ModelInfer(c, shmRequest("small", 100, 48)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "small"`) {
		t.Errorf("an output past its region: %v", err)
	}
	if _, err := f.client.ModelInfer(c, shmRequest("small", 96, 16)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "small"`) {
		t.Errorf("an output larger than its shared_memory_byte_size: %v", err)
	}
	big, bigPath := testdata.SharedMemoryObject(t, 4096)
	if _, err := f.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "shrinks", Key: big, ByteSize: 4096}); err != nil {
		t.Fatal(err)
	}
	os.Truncate(bigPath, 0)
	if _, err := f.client.ModelInfer(c, shmRequest("shrinks", 1024, 64)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `region "shrinks"`) {
		t.Errorf("a truncated object: %v", err)
	}
	if after, _ := os.ReadFile(outside); !bytes.Equal(before, after) {
		t.Fatal("the file outside /dev/shm changed")
	}
	if _, err := f.client.ModelInfer(c, rawRequest()); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
}

// TestCUDASharedMemoryIsRefusedByNameOverGRPC: the CUDA shared memory RPCs answer
// UNIMPLEMENTED saying that kiln does not implement it.
func TestCUDASharedMemoryIsRefusedByNameOverGRPC(t *testing.T) {
	f := start(t, Options{})
	c := ctx(t)
	_, e1 := f.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{})
	_, e2 := f.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "r", ByteSize: 4})
	_, e3 := f.client.CudaSharedMemoryUnregister(c, &pb.CudaSharedMemoryUnregisterRequest{Name: "r"})
	for _, err := range []error{e1, e2, e3} {
		if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "kiln does not implement CUDA shared memory") {
			t.Errorf("%v", err)
		}
	}
}
