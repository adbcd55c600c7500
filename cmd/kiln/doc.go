// Command kiln is the single binary of the project. Commands: serve (the Open Inference
// Protocol server over a Triton-style model repository), prebuild (fill the journal with
// the executables serve asks for first), cache ls|verify|gc|export|import (the binary
// journal), inspect (describe a model, its plan and its executables in the journal),
// compile (ONNX model → .kiln executable), run (once, on the compiled engine or the
// reference evaluator), bench (latency percentiles and throughput, --profile for time
// per kernel, --roofline for each kernel's work against the machine's roofline measured
// by internal/roofline: benchroofline.go), conformance (ONNX-backend-layout test cases on either engine), devices
// (the CPU, the OpenCL devices in kiln's numbering, CUDA GPUs), tune (measure other
// schedules of a model's kernels and keep the fastest as tuning records in the journal:
// package tune; it re-executes kiln as its hidden measuring child, tune-measure),
// version. bench --no-tuning ignores the journal's tuning records.
// compile, run, bench and conformance take --bounds-check: a debug build whose kernels
// check every buffer access (engine.Recipe.BoundsCheck).
//
// Wiring: every command that turns a model into something that runs builds one
// engine.Engine for the host (target.Host, the CPU device, the journal, the recipe from
// -O, --no-fusion, --layout and --bounds-check) with compiler.JIT as its Compiler (jit.go),
// and serve hands it to package serve as its serve.Engine (docs/ARCHITECTURE.md, "The
// engine seam"). kiln serve merges its settings into one configs.File (the config file
// or the defaults, then every flag given on the command line: each flag has a key) and
// fills serve's and the APIs' options from it; kiln prebuild reads the model repository
// with serve/modelrepo, as the server does, so both see the same models. With gpus: auto
// (servegpus.go) kiln serve also gives serve one engine per OpenCL device in kiln's
// numbering (openCLDevices: opencl:N is a config.pbtxt's gpus: [N]), sharing the CPU
// engine's journal, compiler and limits with the CPU as host; each device opens on the
// first load asked of it and closes after the service at exit.
//
// Serve-only build: `go build -tags serveonly ./cmd/kiln` (serveonly.go) links the
// runtime half only: its engine has no Compiler, it has serve, cache, devices and
// version and no compile commands, and a model or shape the journal lacks is refused with an error
// naming the missing entry (engine.ErrNotPrebuilt).
//
// This is the only package that reads flags, files and the environment, and the only
// importer of configs (internal/archtest enforces it); libraries take typed options.
package main
