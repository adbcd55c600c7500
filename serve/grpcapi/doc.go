// Package grpcapi is the gRPC face of serve.Service (docs/ARCHITECTURE.md, "Serving";
// layer 8): the Open Inference Protocol v2 as Triton's inference.GRPCInferenceService
// (inferencepb/grpc_service.proto: Triton's package, names and field numbers, so
// Triton's clients and perf_analyzer work unchanged), the standard health service
// grpc.health.v1 and server reflection. Protocol translation only.
//
// Model: New returns a *grpc.Server with the three services registered; the caller
// listens, and on shutdown drains the service, closes Options.Stopping and calls
// GracefulStop. A ModelInferRequest becomes a serve.InferRequest: inputs come either
// all from raw_input_contents (the i-th entry is the i-th input's little-endian bytes,
// decoded by serve.DecodeRaw; BYTES elements length-prefixed) or all from their typed
// InferTensorContents (the list the datatype selects: bool, int for INT8/16/32, int64,
// uint for UINT8/16/32, uint64, fp32, fp64, bytes; FP16 and BF16 only raw, as in
// Triton); the request id and the request and output parameters pass through. Outputs
// always come back as raw_output_contents, in the order of the response's outputs (as
// Triton does), with contents unset. ModelStreamInfer answers a stream's requests in
// order, one at a time; a failed request gets an error_message and the stream goes on.
// A ModelInfer that waited for its model to compile carries the wait in its header
// metadata (serve.CompileWaitHeader, milliseconds).
//
// Health: the overall service ("") and "inference.GRPCInferenceService" are SERVING
// while svc.Ready() and NOT_SERVING otherwise (a model that should serve failed to
// load, eager loads at start in progress, draining), as ServerReady answers. The
// status is re-read on every Check and List and every 500 ms while a Watch is open, so
// it follows the service without a background goroutine of its own.
//
// Invariants: every error is a gRPC status whose message names the model, version or
// tensor; serve's error classes map as Triton's do: invalid → INVALID_ARGUMENT, not
// found → NOT_FOUND, unavailable or shutting down → UNAVAILABLE, an API switched off
// (serve.ErrDisabled) → UNAVAILABLE (Triton's code for load/unload without model
// control), deadline → DEADLINE_EXCEEDED (CANCELLED when the client cancelled),
// anything else → INTERNAL (and logged). Mixing raw and typed inputs, a raw count that
// is not the input count, a typed list other than the datatype's, or an element count
// that is not the shape's is INVALID_ARGUMENT. The call's deadline is the inference's
// context. Messages up to Options.MaxMessageBytes (256 MiB) are accepted and sent both
// ways; beyond, RESOURCE_EXHAUSTED (checked on the message's length prefix, before
// its bytes are read). A panic in a handler is INTERNAL for that call,
// never a crash. ServerMetadata advertises the same extensions as the REST face.
//
// RepositoryModelLoad/Unload call the service's explicit model control (UNAVAILABLE,
// as Triton answers, when the server runs without it). A load's parameter "config"
// (string_param: the ModelConfig as JSON) is serve.Service.LoadModelWithConfig; any
// other parameter is INVALID_ARGUMENT.
//
// SystemSharedMemoryRegister/Unregister/Status call the service's system shared memory
// (sharedmem.go); an input or output with the parameters shared_memory_region and
// shared_memory_byte_size (shared_memory_offset optional) is read from or written to
// the region: raw_input_contents then holds one entry per input not in shared memory,
// in order, and an output written to a region has an empty raw_output_contents entry
// (so entries stay in the order of outputs) and those parameters, with the byte size
// written. The CudaSharedMemory* RPCs answer UNIMPLEMENTED saying kiln does not
// implement CUDA shared memory.
//
// Not implemented: TraceSetting and LogSettings are declared in the .proto so that
// clients get UNIMPLEMENTED rather than an unknown method; cache statistics are zero.
//
// Authentication, interceptors and the access log (auth.go, accesslog.go). With
// Options.BearerToken the metadata "authorization: Bearer <token>" is checked by the
// server's InTapHandle, on the call's headers, before gRPC creates a stream for it:
// a refused call (UNAUTHENTICATED; SHA-256 digests compared with crypto/subtle) has
// nothing of its message read, and logs its own line, since it never reaches the
// stats handler. grpc.health.v1 and reflection need no token. Interceptors,
// outermost first: the request id (unary: the ModelInferRequest's id, else the
// x-request-id metadata, else 16 random hex digits; streams: the metadata's or a new
// one), sent back as the x-request-id header; with Options.RequestTimeout, a
// deadline on unary calls (a client's shorter one stays; streams are not bounded, as
// one stream carries many requests); panic recovery. The access log is a
// stats.Handler, so that its one line per call, written when the call ends, has the
// status code, the duration and the bytes on the wire both ways (and the message
// counts of a stream) without copying or re-encoding a message; an inference's
// handler adds the device it ran on. Options.TLS makes
// the server TLS-only (grpc.Creds).
//
// Memory and connections (recv.go). gRPC reads a unary call's whole message before
// interceptors run, so every unary method is registered as a stream handler that
// reserves 3 × MaxMessageBytes of a byte budget before it reads the message (a
// message takes three times its size while it is decoded: gRPC's chunks, their
// contiguous copy, the decoded message), shrinks the reservation to the message's
// size, and holds it until the response is sent: the
// inference service from Options.Budget (shared with REST), grpc.health.v1 and
// reflection each from a pool of one message, so that unauthenticated clients hold
// at most one message per open service and health checks never wait for inference
// traffic. ModelStreamInfer requests count against Options.Budget once decoded (a
// stream waiting for its next request holds nothing). A call waiting for the budget
// waits first come first served, within its deadline and Options.RequestTimeout.
// Options.MaxConcurrentStreams bounds the calls of one connection (128), and
// Options.IdleTimeout closes connections with no call open (keepalive
// MaxConnectionIdle, a GOAWAY).
//
// References: KServe Open Inference Protocol (gRPC); Triton Inference Server's
// grpc_service.proto and its statistics, model configuration, model repository and
// shared memory extensions; gRPC health checking protocol (grpc.health.v1); gRPC server reflection.
package grpcapi
