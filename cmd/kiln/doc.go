// Command kiln is the single binary of the project. Subcommands today: inspect (describe
// a model), run (evaluate once on .npy/.pb inputs), conformance (run ONNX-backend-layout
// test cases and compare), version. Engines: only the reference evaluator (--engine ref)
// exists; asking for another engine is an error that says so.
//
// This is the only package that reads flags, files and the environment; libraries take
// typed options.
package main
