// Package servetest is a serve.Engine for the tests of the serving packages (serve,
// serve/httpapi, serve/grpcapi) that runs models with the reference interpreter
// (kernels/ref) instead of compiling them: no C compiler, no journal, no device. The
// protocol tests exercise the service and its APIs, not the compiler, so they pass on a
// machine without one; the compiled path is tested by serve's own tests and
// cmd/kiln's.
//
// Model: Open reads a model version as the real engine does (engine.Open); Load waits
// Delay (standing in for a compile, so deadline and concurrency tests have a compile
// to wait for, honouring the context), runs Hook (a test's stand-in for one model's slow
// or failing compile: it blocks until the test releases it, so a "10 s compile" takes
// no 10 s), re-reads the file through onnx.LoadVerified
// (files changed since Open are onnx.ErrChanged, as with the real engine) and returns a
// runner that evaluates the module per request.
//
// Fixtures: WriteDensenetRepo writes the repository of Triton's documented
// densenet_onnx configuration (DensenetConfig: reshapes and a label file) around the
// bundled SqueezeNet, and TopClasses is what Triton's classification extension answers
// for its logits, so each protocol's tests check the same thing.
package servetest
