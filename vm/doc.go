// Package vm is kiln's register machine (ARCHITECTURE.md §4), modeled on TVM's Relay VM:
// functions of instructions over numbered registers, kernels called in
// destination-passing style, host builtins from a typed table, and an Executable that
// serializes to a checksummed binary.
//
// Present: the instruction set; the Executable with its entry signature (input and
// output names, element types, shapes; Run refuses inputs that do not match, ErrInput)
// and binary format (MarshalBinary/UnmarshalBinary with magic, format version, CRC-32C,
// bounded decoding, fuzz targets); Verify (every register, jump, function, constant,
// kernel and binary reference is checked, so an executable that decodes cleanly cannot
// make the interpreter index out of range); the interpreter: Load binds binaries to
// devices (by kind, refusing a foreign fingerprint), kernels and builtins by name,
// uploads constants; Run executes the entry function on host inputs with per-call
// frames and storages (safe for concurrent calls), tensors placed at offsets inside
// storages through devices.Slicer, a recursion limit, cancellation checked every 1024
// instructions, and a recovered panic in a builtin reported as an error. PlanMemory is
// the static memory plan the compiler applies (best fit over tensor lifetimes, one
// arena); a pool keeps the storages of finished calls for later calls of the same
// executable, so a warm request allocates nothing. StdBuiltins holds the scalar
// bookkeeping of compiled loops. RunProfiled times each kernel (kiln bench --profile).
// Not present yet: dynamic shapes (shape functions, AllocTensorReg from computed
// shapes in compiled code) and background specialization (#6).
//
// Invariants: decoding untrusted bytes returns an error wrapping ErrFormat or ErrVersion,
// never panics, and never allocates more than the input can describe; a decoded
// executable re-encodes to the same bytes.
//
// References: TVM Relay VM (Roesch et al., "Relay: A High-Level Compiler for Deep
// Learning", 2019; the VM design document).
package vm
