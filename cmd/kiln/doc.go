// Command kiln is the single binary of the project. Subcommands today: inspect (describe
// a model), compile (ONNX model → .kiln executable for the input shapes given), run
// (once, on the compiled engine or the reference evaluator), bench (latency percentiles
// and throughput, --profile for time per kernel), conformance (ONNX-backend-layout test
// cases on either engine), version. compile, run, bench and conformance take
// --bounds-check: a debug build whose kernels check every buffer access
// (engine.Recipe.BoundsCheck).
//
// This is the only package that reads flags, files and the environment; libraries take
// typed options.
package main
