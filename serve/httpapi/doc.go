// Package httpapi is the REST face of serve.Service (docs/ARCHITECTURE.md, "Serving";
// layer 8): the Open Inference Protocol v2 over HTTP with gin, one route table
// (routes.go), and protocol translation only.
//
// Model: requests are decoded into serve.InferRequest (JSON "data" flat or nested; the
// binary tensor data extension: Inference-Header-Content-Length, per-input
// binary_data_size, per-output binary_data and request-level binary_data_output);
// responses are encoded back the same way. Bodies may be gzip or deflate encoded; the
// size limit applies after decompression. A response to an inference that waited for
// its model to compile has the header Kiln-Compile-Wait-Ms (serve.CompileWaitHeader:
// the wait in milliseconds); every inference response has Server-Timing: infer;dur=MS
// (W3C Server Timing: the execution's time, the statistics' compute_infer). The JSON
// header of a request is decoded by reqjson.go: fastjson up to 16 KiB, encoding/json
// beyond, to the same result (FuzzDecodeHeader). /v2/health/ready is 200 when svc.Ready() (strict: a model
// that should serve and failed to load makes it 503), else 503.
//
// Invariants: every error is {"error": "..."} naming the model, tensor or field, with
// Triton's status class (400 invalid, 404 unknown model/version/endpoint, 503 not
// available or shutting down, 413 too large, 500 internal); a bad request never
// disturbs other requests; GET /v2 advertises only the extensions implemented
// (binary_tensor_data, classification, statistics, model_configuration,
// model_repository, system_shared_memory). Output parameters (classification among them) pass through to
// the service, which answers them. A repository load's body may carry
// {"parameters": {"config": "<JSON>"}} (serve.Service.LoadModelWithConfig); any other
// load parameter is 400.
//
// Middleware (routes.go installs it, in this order): accessLog gives each request an
// id (X-Request-ID from the client when it is 1–128 printable characters, else 16
// random hex digits), echoes it, and logs one line when the request is done (request
// id, method, path, status, duration, model, version, the device an inference ran on,
// bytes in as read and out as written, client; health probes at debug level, the rest at info); gin's recovery;
// ioDeadlines (limits.go: the request's read and write deadlines, below); reserveOnly
// (conns.go: a probe-reserve connection answers only the health probes); with
// Options.BearerToken, bearerAuth (auth.go): "Authorization: Bearer <token>" on
// every path but /v2/health/live and /v2/health/ready (Kubernetes probes send no
// credentials), unknown paths included, compared as SHA-256 digests with
// crypto/subtle, else 401 {"error": "..."} with WWW-Authenticate: Bearer;
// declaredTooLarge (a Content-Length above MaxRequestBytes is 413 before any of the
// body is read, and the connection closes); with Options.RequestTimeout, a deadline
// on the request's context (the inference's queueing, compile wait and run; 504 past
// it). TLS is the caller's (an http.Server with TLSConfig).
//
// Slow and hostile clients (limits.go, conns.go). The connection's deadlines are set
// per request through http.ResponseController rather than with the http.Server's
// ReadTimeout and WriteTimeout, which count from the request's headers: a
// WriteTimeout would cut an inference longer than it, and a ReadTimeout still
// pending after the body fires in net/http's background read and cancels the
// request. Options.ReadTimeout: the body must be read within it from the start of
// the request's handling (a body trickled slower is cut: 408, connection closed; the
// deadline is cleared once the body is read to its end, and it also bounds
// net/http's discarding of a body a handler left unread). Options.WriteTimeout: the
// response must be written within it, counted from the request's start on every
// endpoint but inference and from the end of the inference there. Options.Budget
// (internal/membudget, shared with the gRPC face): an inference reserves its body's
// declared length, or MaxRequestBytes while a compressed or chunked body is read
// (then its size), before reading it, and holds it until the response is written;
// the wait ends at the body's read deadline with 503. The caller sets the
// http.Server's ReadHeaderTimeout and IdleTimeout (idle keep-alive connections) and
// may cap its connections with LimitConns: at the cap a new connection closes the
// one that has waited longest without a request in progress (idle keep-alive, or
// accepted without a request yet); when every connection has a request in progress,
// up to ConnLimits.ProbeReserve more are accepted that answer only
// /v2/health/live and /v2/health/ready (503 otherwise) and close after one
// response; beyond, a connection is closed at once. The probes thus answer with any
// number of idle connections open and with every connection busy.
//
// Binary request bodies are read into a buffer placed so that the binary part starts on
// a 64-byte boundary, and the input tensors alias it (no copy); the VM in turn reads
// such an input of 64 KiB or more in place as a kernel argument (package vm, bind), so
// a large tensor's bytes are copied once, by the operating system from the socket into
// the buffer the kernels read. The JSON response header is encoded from typed structs
// (the bytes a map of the same fields gives). An inference body of 64 KiB or more is
// read into a buffer of a power-of-two class from a pool (bodypool.go), given back only
// once the inference has succeeded and the response is written (a failed request's
// inputs may still be queued: its buffer is left to the garbage collector), so large
// requests neither clear a fresh buffer each nor feed the collector.
//
// Binary responses are written as the JSON header and then each output's bytes (views
// of the output tensors, no concatenated copy); with ConnContext installed on the
// http.Server, TCP_CORK holds them back until the handler has written them all, so a
// response beyond net/http's 4 KiB connection buffer reaches the client in one send
// and wakes it once, not twice (cork.go; plain TCP on Linux only).
//
// System shared memory (sharedmem.go): /v2/systemsharedmemory[/region/NAME]/register
// ({"key", "offset", "byte_size"}), /unregister and /status (a JSON list of {name, key,
// offset, byte_size}) call the service; an input with the parameters
// shared_memory_region and shared_memory_byte_size (shared_memory_offset optional)
// carries no data, and an output requested with them comes back with those parameters
// (the byte size written) and no data. The CUDA shared memory endpoints
// (/v2/cudasharedmemory/...) answer 501 saying kiln does not implement it.
//
// References: KServe Open Inference Protocol REST spec; Triton's binary tensor data,
// classification, statistics, model repository and shared memory extensions.
package httpapi
