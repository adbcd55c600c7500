// Package httpapi is the REST face of serve.Service (ARCHITECTURE.md §7, layer 8): the
// Open Inference Protocol v2 over HTTP with gin, one route table (routes.go), and
// protocol translation only.
//
// Model: requests are decoded into serve.InferRequest (JSON "data" flat or nested; the
// binary tensor data extension: Inference-Header-Content-Length, per-input
// binary_data_size, per-output binary_data and request-level binary_data_output);
// responses are encoded back the same way. Bodies may be gzip or deflate encoded; the
// size limit applies after decompression.
//
// Invariants: every error is {"error": "..."} naming the model, tensor or field, with
// Triton's status class (400 invalid, 404 unknown model/version/endpoint, 503 not
// available or shutting down, 413 too large, 500 internal); a bad request never
// disturbs other requests; GET /v2 advertises only the extensions implemented
// (binary_tensor_data, statistics, model_configuration, model_repository).
//
// Not yet: TLS and auth,
// request ids in logs (issue #8).
//
// References: KServe Open Inference Protocol REST spec; Triton's binary tensor data,
// statistics and model repository extensions.
package httpapi
