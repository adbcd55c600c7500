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
// Middleware (routes.go installs it, in this order): accessLog gives each request an
// id (X-Request-ID from the client when it is 1–128 printable characters, else 16
// random hex digits), echoes it, and logs one line when the request is done (request
// id, method, path, status, duration, model, version, bytes in as read and out as
// written, client; health probes at debug level, the rest at info); gin's recovery;
// with Options.BearerToken, bearerAuth (auth.go): "Authorization: Bearer <token>" on
// every path but /v2/health/live and /v2/health/ready (Kubernetes probes send no
// credentials), unknown paths included, compared as SHA-256 digests with
// crypto/subtle, else 401 {"error": "..."} with WWW-Authenticate: Bearer; with
// Options.RequestTimeout, a deadline on the request's context (the inference's
// queueing, compile wait and run; 504 past it; reading the body is bounded by the
// http.Server, not by it). TLS is the caller's (an http.Server with TLSConfig).
//
// Binary responses are written as the JSON header and then each output's bytes (views
// of the output tensors, no concatenated copy); with ConnContext installed on the
// http.Server, TCP_CORK holds them back until the handler has written them all, so a
// response beyond net/http's 4 KiB connection buffer reaches the client in one send
// and wakes it once, not twice (cork.go; plain TCP on Linux only).
//
// References: KServe Open Inference Protocol REST spec; Triton's binary tensor data,
// statistics and model repository extensions.
package httpapi
