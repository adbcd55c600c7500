package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/kilnrt/kiln/internal/membudget"
	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/tensor"
)

// ModelInfer runs one inference under the call's deadline. A request that waited for
// its model to compile says how long in the header metadata serve.CompileWaitHeader.
func (s *server) ModelInfer(ctx context.Context, req *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	resp, wait, err := s.infer(ctx, req)
	if err != nil {
		return nil, s.failCtx(ctx, err)
	}
	if wait > 0 {
		grpc.SetHeader(ctx, metadata.Pairs(serve.CompileWaitHeader, serve.CompileWaitMillis(wait)))
	}
	return resp, nil
}

// ModelStreamInfer answers each request of the stream, in order, with a response or an
// error message; a failed request does not end the stream (as in Triton). Requests of
// one stream run one after the other. Options.Stopping ends the stream between
// requests.
func (s *server) ModelStreamInfer(stream pb.GRPCInferenceService_ModelStreamInferServer) error {
	ctx := stream.Context()
	type received struct {
		req  *pb.ModelInferRequest
		held *membudget.Reservation // the request's bytes in Options.Budget
	}
	reqs := make(chan received)
	recvErr := make(chan error, 1)
	go func() { // ends when the client closes its side or the call ends (Recv fails)
		for {
			req, err := stream.Recv()
			if err == nil {
				var held *membudget.Reservation
				if held, err = reserveFor(ctx, s.pools.infer, msgSize(req), 0); err == nil {
					select {
					case reqs <- received{req, held}:
						continue
					case <-ctx.Done():
						held.Release()
						return
					}
				}
			}
			recvErr <- err
			return
		}
	}()
	for {
		var r received
		select {
		case r = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.opts.Stopping:
			return errStopping
		}
		err := s.answer(ctx, stream, r.req)
		r.held.Release()
		if err != nil {
			return err
		}
	}
}

// answer runs one request of a stream and sends its response or error message; the
// error returned ends the stream.
func (s *server) answer(ctx context.Context, stream pb.GRPCInferenceService_ModelStreamInferServer, req *pb.ModelInferRequest) error {
	out := &pb.ModelStreamInferResponse{}
	resp, _, err := s.infer(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return s.failCtx(ctx, err)
		}
		out.ErrorMessage = err.Error()
	} else {
		out.InferResponse = resp
	}
	return stream.Send(out)
}

// infer runs one request; wait is how long it waited for its model to compile.
func (s *server) infer(ctx context.Context, req *pb.ModelInferRequest) (_ *pb.ModelInferResponse, wait time.Duration, _ error) {
	in, err := decodeRequest(req)
	if err != nil {
		return nil, 0, err
	}
	res, err := s.svc.Infer(ctx, in)
	if err != nil {
		return nil, 0, err
	}
	if c := callOf(ctx); c != nil { // the access log names the device
		c.mu.Lock()
		c.device = res.Device
		c.mu.Unlock()
	}
	out, err := encodeResponse(res)
	return out, res.CompileWait, err
}

// decodeRequest translates a ModelInferRequest. An input's data is either in
// raw_input_contents (the i-th entry for the i-th input, every input; Triton's
// clients send this) or in its typed contents; mixing the two is refused, as Triton
// does.
func decodeRequest(req *pb.ModelInferRequest) (*serve.InferRequest, error) {
	out := &serve.InferRequest{Model: req.ModelName, Version: req.ModelVersion, ID: req.Id}
	var err error
	if out.Params, err = params(req.Parameters, "request"); err != nil {
		return nil, err
	}
	raw := req.RawInputContents
	inShm, carried, err := inputsInSharedMemory(req)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 && len(raw) != carried {
		return nil, fmt.Errorf("%w: model %q: %d raw_input_contents for %d inputs not in shared memory (one per such input, in the order of inputs)", serve.ErrInvalid, req.ModelName, len(raw), carried)
	}
	r := 0 // the next raw_input_contents
	for i, in := range req.Inputs {
		if in.Name == "" {
			return nil, fmt.Errorf("%w: model %q: input %d has no name", serve.ErrInvalid, req.ModelName, i)
		}
		t := serve.Tensor{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape, SharedMemory: inShm[i]}
		switch {
		case t.SharedMemory != nil && in.Contents != nil:
			return nil, fmt.Errorf("%w: model %q: input %q has contents and shared_memory_region", serve.ErrInvalid, req.ModelName, in.Name)
		case t.SharedMemory != nil:
		case len(raw) > 0 && in.Contents != nil:
			return nil, fmt.Errorf("%w: model %q: input %q has contents while the request uses raw_input_contents (use one or the other for every input)", serve.ErrInvalid, req.ModelName, in.Name)
		case len(raw) > 0:
			t.Data, err = serve.DecodeRaw(in.Name, in.Datatype, in.Shape, raw[r])
			r++
		case in.Contents != nil:
			t.Data, err = decodeContents(in.Name, in.Datatype, in.Shape, in.Contents)
		default:
			return nil, fmt.Errorf("%w: model %q: input %q has no data (neither contents nor raw_input_contents)", serve.ErrInvalid, req.ModelName, in.Name)
		}
		if err != nil {
			return nil, err
		}
		if _, err := params(in.Parameters, fmt.Sprintf("input %q", in.Name)); err != nil {
			return nil, err
		}
		out.Inputs = append(out.Inputs, t)
	}
	for _, o := range req.Outputs {
		p, err := params(o.Parameters, fmt.Sprintf("output %q", o.Name))
		if err != nil {
			return nil, err
		}
		ref, err := serve.SharedMemoryOf(fmt.Sprintf("output %q", o.Name), p)
		if err != nil {
			return nil, err
		}
		out.Outputs = append(out.Outputs, serve.RequestedOutput{Name: o.Name, Params: p, SharedMemory: ref})
	}
	return out, nil
}

// params converts protocol parameters to Go values (bool, int64, string, float64,
// uint64), as serve.InferRequest carries them.
func params(ps map[string]*pb.InferParameter, where string) (map[string]any, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(ps))
	for k, p := range ps {
		switch v := p.GetParameterChoice().(type) {
		case *pb.InferParameter_BoolParam:
			out[k] = v.BoolParam
		case *pb.InferParameter_Int64Param:
			out[k] = v.Int64Param
		case *pb.InferParameter_StringParam:
			out[k] = v.StringParam
		case *pb.InferParameter_DoubleParam:
			out[k] = v.DoubleParam
		case *pb.InferParameter_Uint64Param:
			out[k] = v.Uint64Param
		default:
			return nil, fmt.Errorf("%w: %s: parameter %q has no value", serve.ErrInvalid, where, k)
		}
	}
	return out, nil
}

// encodeResponse puts every output's bytes in raw_output_contents, in the order of
// outputs, as Triton does whatever the request's encoding.
func encodeResponse(res *serve.InferResponse) (*pb.ModelInferResponse, error) {
	out := &pb.ModelInferResponse{ModelName: res.Model, ModelVersion: res.Version, Id: res.ID}
	for _, o := range res.Outputs {
		t := &pb.ModelInferResponse_InferOutputTensor{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape}
		out.Outputs = append(out.Outputs, t)
		if o.SharedMemory != nil { // written to the region: an empty entry keeps the order
			t.Parameters = shmParams(o.SharedMemory)
			out.RawOutputContents = append(out.RawOutputContents, nil)
			continue
		}
		b, err := serve.EncodeRaw(o.Data)
		if err != nil {
			return nil, fmt.Errorf("model %q: output %q: %w", res.Model, o.Name, err)
		}
		out.RawOutputContents = append(out.RawOutputContents, b)
	}
	return out, nil
}

// contentLists names InferTensorContents' lists; listFor says which one a datatype
// uses.
var contentLists = []string{"bool_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents", "fp32_contents", "fp64_contents", "bytes_contents"}

func listFor(dt tensor.DType) (string, bool) {
	switch dt {
	case tensor.Bool:
		return "bool_contents", true
	case tensor.Int8, tensor.Int16, tensor.Int32:
		return "int_contents", true
	case tensor.Int64:
		return "int64_contents", true
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		return "uint_contents", true
	case tensor.Uint64:
		return "uint64_contents", true
	case tensor.Float32:
		return "fp32_contents", true
	case tensor.Float64:
		return "fp64_contents", true
	case tensor.String:
		return "bytes_contents", true
	}
	return "", false // FP16, BF16: raw contents only
}

func listLens(c *pb.InferTensorContents) []int {
	return []int{len(c.BoolContents), len(c.IntContents), len(c.Int64Contents), len(c.UintContents), len(c.Uint64Contents), len(c.Fp32Contents), len(c.Fp64Contents), len(c.BytesContents)}
}

// decodeContents decodes an input from its typed contents: the list its datatype
// selects, with exactly as many elements as the shape, and no other list.
func decodeContents(name, datatype string, shape []int64, c *pb.InferTensorContents) (*tensor.Tensor, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: input %q: %s", serve.ErrInvalid, name, fmt.Sprintf(format, args...))
	}
	dt, err := serve.DTypeOf(datatype)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", name, err)
	}
	count, err := serve.CheckShape(name, shape)
	if err != nil {
		return nil, err
	}
	n, ts := int64(count), make(tensor.Shape, len(shape))
	for i, d := range shape {
		ts[i] = int(d)
	}
	want, ok := listFor(dt)
	if !ok {
		return nil, bad("%s data has no typed contents; send it in raw_input_contents", datatype)
	}
	var used []string
	have := 0
	for i, l := range listLens(c) {
		if l == 0 {
			continue
		}
		if contentLists[i] == want {
			have = l
		} else {
			used = append(used, contentLists[i])
		}
	}
	if len(used) > 0 {
		return nil, bad("%s data goes in %s, the request has %s", datatype, want, strings.Join(used, ", "))
	}
	if int64(have) != n {
		return nil, bad("%d elements in %s for shape %v (%d elements)", have, want, shape, n)
	}
	switch dt {
	case tensor.Bool:
		return tensor.FromSlice(ts, c.BoolContents)
	case tensor.Int8:
		return narrow[int32, int8](ts, c.IntContents, math.MinInt8, math.MaxInt8, bad, datatype)
	case tensor.Int16:
		return narrow[int32, int16](ts, c.IntContents, math.MinInt16, math.MaxInt16, bad, datatype)
	case tensor.Int32:
		return tensor.FromSlice(ts, c.IntContents)
	case tensor.Int64:
		return tensor.FromSlice(ts, c.Int64Contents)
	case tensor.Uint8:
		return narrow[uint32, uint8](ts, c.UintContents, 0, math.MaxUint8, bad, datatype)
	case tensor.Uint16:
		return narrow[uint32, uint16](ts, c.UintContents, 0, math.MaxUint16, bad, datatype)
	case tensor.Uint32:
		return tensor.FromSlice(ts, c.UintContents)
	case tensor.Uint64:
		return tensor.FromSlice(ts, c.Uint64Contents)
	case tensor.Float32:
		return tensor.FromSlice(ts, c.Fp32Contents)
	case tensor.Float64:
		return tensor.FromSlice(ts, c.Fp64Contents)
	case tensor.String:
		s := make([]string, len(c.BytesContents))
		for i, b := range c.BytesContents {
			s[i] = string(b)
		}
		return tensor.FromSlice(ts, s)
	}
	return nil, bad("unhandled datatype %s", datatype) // unreachable: listFor covers the rest
}

// narrow converts a wide content list to a narrower element type, refusing values out
// of its range.
func narrow[W int32 | uint32, N int8 | int16 | uint8 | uint16](shape tensor.Shape, in []W, lo, hi int64, bad func(string, ...any) error, datatype string) (*tensor.Tensor, error) {
	out := make([]N, len(in))
	for i, v := range in {
		if int64(v) < lo || int64(v) > hi {
			return nil, bad("element %d (%d) is out of the range of %s", i, v, datatype)
		}
		out[i] = N(v)
	}
	return tensor.FromSlice(shape, out)
}
