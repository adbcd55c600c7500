// Command kiln is the single binary of the project. Subcommands today: inspect (describe
// a model), compile (ONNX model → .kiln executable for the input shapes given), run
// (once, on the compiled engine or the reference evaluator), bench (latency percentiles
// and throughput, --profile for time per kernel), conformance (ONNX-backend-layout test
// cases on either engine), version. compile, run, bench and conformance take
// --bounds-check: a debug build whose kernels check every buffer access
// (engine.Recipe.BoundsCheck).
//
// This is the only package that reads flags, files and the environment; libraries take
// typed options. kiln serve merges its settings into one configs.File (the config file
// or the defaults, then every flag given on the command line: each flag has a key) and
// fills serve's and the APIs' options from it; kiln prebuild reads the model repository
// with serve/modelrepo, as the server does, so both see the same models.
package main
