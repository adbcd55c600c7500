package grpcapi

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// Triton's system shared memory extension over gRPC, served by the service; CUDA
// shared memory is not implemented and its RPCs answer UNIMPLEMENTED saying so.

func (s *server) SystemSharedMemoryRegister(_ context.Context, req *pb.SystemSharedMemoryRegisterRequest) (*pb.SystemSharedMemoryRegisterResponse, error) {
	if err := s.svc.RegisterSystemSharedMemory(req.Name, req.Key, req.Offset, req.ByteSize); err != nil {
		return nil, s.fail(err)
	}
	return &pb.SystemSharedMemoryRegisterResponse{}, nil
}

func (s *server) SystemSharedMemoryUnregister(_ context.Context, req *pb.SystemSharedMemoryUnregisterRequest) (*pb.SystemSharedMemoryUnregisterResponse, error) {
	if err := s.svc.UnregisterSystemSharedMemory(req.Name); err != nil {
		return nil, s.fail(err)
	}
	return &pb.SystemSharedMemoryUnregisterResponse{}, nil
}

func (s *server) SystemSharedMemoryStatus(_ context.Context, req *pb.SystemSharedMemoryStatusRequest) (*pb.SystemSharedMemoryStatusResponse, error) {
	regions, err := s.svc.SystemSharedMemoryStatus(req.Name)
	if err != nil {
		return nil, s.fail(err)
	}
	out := &pb.SystemSharedMemoryStatusResponse{Regions: map[string]*pb.SystemSharedMemoryStatusResponse_RegionStatus{}}
	for _, r := range regions {
		out.Regions[r.Name] = &pb.SystemSharedMemoryStatusResponse_RegionStatus{Name: r.Name, Key: r.Key, Offset: r.Offset, ByteSize: r.ByteSize}
	}
	return out, nil
}

// errNoCUDASharedMemory answers every CUDA shared memory RPC.
var errNoCUDASharedMemory = status.Error(codes.Unimplemented, "kiln does not implement CUDA shared memory; use system shared memory (SystemSharedMemoryRegister)")

func (s *server) CudaSharedMemoryStatus(context.Context, *pb.CudaSharedMemoryStatusRequest) (*pb.CudaSharedMemoryStatusResponse, error) {
	return nil, errNoCUDASharedMemory
}

func (s *server) CudaSharedMemoryRegister(context.Context, *pb.CudaSharedMemoryRegisterRequest) (*pb.CudaSharedMemoryRegisterResponse, error) {
	return nil, errNoCUDASharedMemory
}

func (s *server) CudaSharedMemoryUnregister(context.Context, *pb.CudaSharedMemoryUnregisterRequest) (*pb.CudaSharedMemoryUnregisterResponse, error) {
	return nil, errNoCUDASharedMemory
}

// inputsInSharedMemory reads each input's shared memory parameters (nil entries for
// the inputs whose data the request carries, carried of them).
func inputsInSharedMemory(req *pb.ModelInferRequest) (refs []*serve.SharedMemoryRef, carried int, _ error) {
	refs = make([]*serve.SharedMemoryRef, len(req.Inputs))
	for i, in := range req.Inputs {
		what := fmt.Sprintf("input %q", in.Name)
		p, err := params(in.Parameters, what)
		if err != nil {
			return nil, 0, err
		}
		if refs[i], err = serve.SharedMemoryOf(what, p); err != nil {
			return nil, 0, err
		}
		if refs[i] == nil {
			carried++
		}
	}
	return refs, carried, nil
}

// shmParams is the response parameters of an output written to shared memory.
func shmParams(ref *serve.SharedMemoryRef) map[string]*pb.InferParameter {
	u := func(v uint64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: int64(v)}}
	}
	return map[string]*pb.InferParameter{
		"shared_memory_region":    {ParameterChoice: &pb.InferParameter_StringParam{StringParam: ref.Region}},
		"shared_memory_offset":    u(ref.Offset),
		"shared_memory_byte_size": u(ref.ByteSize),
	}
}
