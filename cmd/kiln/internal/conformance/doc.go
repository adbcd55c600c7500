// Package conformance runs test cases laid out like the ONNX backend tests —
// `model.onnx` plus `test_data_set_N/{input_K.pb, output_K.pb}` — through an engine and
// compares the results with a tolerance. It serves `kiln conformance` for both the ONNX
// node suite and the model zoo.
//
// Engines: RefEngine (the reference evaluator), CompiledEngine (kernels kiln generates,
// compiled per model and shape binding; CompiledEngineWith also builds them
// bounds-checked, engine.Recipe.BoundsCheck, as TestZooBoundsChecked does for the
// zoo) and GenericEngine (one executable per model, its symbolic dims left free).
// The compiled engines feed a test's sequences and optionals to the VM
// (vm.SeqValue, vm.OptValue through engine.ValueRunner) and hand its results back as
// the reference evaluator's values; an input they cannot take is
// ErrCompiledUnsupported (the case is skipped, not failed).
//
// Invariants: one case can never stop the run (errors, panics and timeouts become that
// case's result); a model the loader reports as unsupported is "unsupported", never a
// failure, and every non-passing case carries a reason; a run that is random (a
// stochastic op, or Dropout in training mode with a positive ratio, read from the
// case's constants and inputs) is compared with the stored outputs by element type and
// shape alone (their values only the generator that made them could reproduce), and a
// pass says so in its Reason (RandomPass: "shape and dtype; values random"). A case
// whose test data contradicts its model or ONNX's rules is "baddata" with the proof
// (baddata.go: an input shape the model does not declare, bfloat16 outputs that are an
// input truncated, stored outputs that match other attributes than the model's), never
// a failure.
package conformance
