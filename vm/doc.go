// Package vm is kiln's register machine (docs/ARCHITECTURE.md, "The VM"), modeled on
// TVM's Relay VM: functions of instructions over numbered registers, kernels called in
// destination-passing style, host builtins from a typed table, and an Executable that
// serializes to a checksummed binary.
//
// The package holds the instruction set; the Executable with its entry signature (input
// and output names, element types, shapes; Run refuses inputs that do not match, ErrInput)
// and binary format; Verify (every register, jump, function, constant, kernel and binary
// reference is checked, so an executable that decodes cleanly cannot make the
// interpreter index out of range); the interpreter: Load binds binaries to devices (by
// kind, refusing a foreign fingerprint), kernels and builtins by name, and the constants;
// Run executes the entry function on host inputs with per-call frames and storages (safe
// for concurrent calls), tensors placed at offsets inside storages through
// devices.Slicer, a recursion limit, cancellation checked every 1024 instructions, and a
// recovered panic in a builtin reported as an error. PlanMemory is the static memory
// plan the compiler applies (best fit over tensor lifetimes, one arena). A host input
// of 64 KiB or more whose bytes start 64-byte aligned is bound in place on a device that
// maps host memory (the CPU, devices.HostMapper): its storage is a view of the caller's
// memory, marked constant (the launch check refuses a kernel that would write it), freed
// at the call's end without touching the bytes; the caller keeps the input unchanged
// until Run returns. Other inputs are copied into pooled storages. Storages come
// from a best-fit pool over device buffers (pool.go): a request takes the smallest free
// block that fits (the most recently freed of equals) and splits off the remainder when
// it is at least 64 KiB and a quarter of the request; a split storage is a view of its
// parent buffer at a PlanAlign-aligned offset (Storage.Buf holds exactly its bytes, and
// tensors in it are viewed from the parent at base+Offset), blocks return when their
// call ends and coalesce with free neighbours, and a parent goes back to the device only
// when whole and free: least recently used first while the free bytes exceed the budget
// (SetMemoryBudget, DefaultMemoryBudget 1 GiB), all on TrimMemory, and when a device
// allocation fails. A static plan asks for the same sizes every call, so a warm request
// is an exact hit on a whole buffer and allocates nothing; calls whose sizes vary reuse
// larger blocks, and Reserve plans against a known upper bound. MemoryStats reports
// bytes held, in use and free, device allocations, hits, misses and splits.
// StdBuiltins holds the scalar bookkeeping of compiled loops, the shape arithmetic of
// symbolic dims (builtins_shape.go) and the host shape functions of value-dependent
// shapes (builtins_hostshape*.go: Reshape's target with 0 and -1, Squeeze, Unsqueeze,
// broadcasting, Tile, a shape tensor, Range's length, clamped Slice bounds, Pad, Split
// sizes, OneHot's depth, a reduction's axes, STFT's frames and bins, MelWeightMatrix's
// extents, DFT's length). Each reads int64 host tensors and checks
// every value a request supplies: a negative or overflowing extent, an element count
// that changes, an axis out of range or repeated, a rank above 32 or an extent above
// 2^40 is an ErrInput error (the instruction's Str names the node), never a panic or an
// allocation.
//
// Host ops (hostop.go): CallHost runs an entry of the executable's host call table
// (HostCalls: an op name, its attributes as named lists of ints, floats or strings, and
// the op input each argument is) on host copies of its arguments and sets its register
// to the tuple of the outputs, host tensors. The op table (HostOps, StdHostOps unless
// Options.HostOps is given) is resolved by name at load, where each op's Check validates
// the call's attributes; Verify checks the table's form (attributes sorted and distinct,
// values of their kind, slots ascending and below 64, the instruction's index and
// argument count). An op allocates through its HostCtx: each tensor within TensorBytes,
// all of them within what the call may still hold of RequestBytes (ErrInput and
// ErrMemoryLimit otherwise); a value a request gets wrong is an ErrInput, and a panic is
// recovered into an error; both name the node. The text host ops (hostop_strings.go)
// run on the host because a string tensor has no device layout (its elements are Go
// strings of any length): StringNormalizer, TfIdfVectorizer (on integer inputs too: a
// hash of n-grams, no loop nest) and CastString, every Cast or CastLike to or from
// strings with ONNX's printing and parsing rules. String inputs of a call stay host
// values (never uploaded), counted in the call's bytes with the strings they hold, and
// each text op counts its output strings' bytes before it makes them; text that is not
// valid UTF-8 where case matters, or is no number where one is read, is an ErrInput.
//
// The standard host ops (StdHostOps) are the ops whose output extents depend on the
// data: NonZero and Compress (hostop_select.go: count, allocate, fill; on the host
// because the count needs the whole input before the output exists, and a device
// kernel would need a second launch and a read-back of the count anyway), Unique
// (hostop_unique.go: a hash of each item's values, then a stable sort), NonMaxSuppression
// (hostop_nms.go: a sort and a sequential suppression loop per class), TopK with a k
// known only at run time (hostop_topk.go: a stable sort per row; a constant k has a
// kernel) and MaxUnpool with a run-time output_shape (hostop_maxunpool.go: a scatter
// whose output extents are the operand's values; without one it has a kernel). Their
// checks: k a single integer in [0, the axis's extent]; an axis in range; a Compress
// condition of one dimension; boxes and scores of fitting shapes, no NaN or infinite
// coordinate, no NaN score or threshold, and at most batches × classes × boxes rows
// whatever max_output_boxes_per_class says; MaxUnpool indices inside the unpooled shape
// and inside output_shape, which keeps X's batch and channels. Each output is allocated
// through the HostCtx, after the count that sizes it. The random ops (hostop_random.go:
// RandomNormal, RandomUniform, their Like forms, Bernoulli, Multinomial) run there too,
// with the generator that file documents (Random: PCG seeded from the seed attribute, a
// fresh stream per run without one); the reference evaluator calls the same functions,
// so a seeded op draws the same numbers on both engines.
//
// Fatal stops a run with its message as an ErrInput: the compiler emits it for a
// branch that cannot run on the shapes the executable was built for, so a request that
// takes it is refused, not answered.
//
// Sizes and limits: every byte count, offset and extent computed from an executable or
// a request is checked (tensor.CheckedSize and friends; shape programs evaluate with
// checked arithmetic), so none wraps around. Limits (LoadWith's Options; zero fields
// from DefaultLimits: a quarter of SystemMemory for one tensor, half of it for one
// call, SystemMemory being the cgroup's memory limit or else the physical memory) bound
// each call: Load refuses a static plan or a static tensor above them, mem.plan
// (BuiltinMemPlan, which the compiler puts after the prologue that binds the symbols)
// refuses a call whose run-time sized tensors would exceed them before anything runs,
// and every allocation of a call (inputs, arena, storages) and every builtin result is
// counted against them while it runs; a refusal wraps ErrMemoryLimit, and ErrInput
// when the request's shapes cause it, and names the tensor and node (the compiler puts
// them in the instructions' Str) with the bytes asked, the limit and how to raise it.
// Kernel launches are checked: each kernel table entry describes what the kernel may
// touch through each argument (KernelArg: elements as an Extent over its runtime dims),
// and every launch compares it with the tensor passed (per launch, not per element);
// runtime dims must not be negative. A host kernel's launch allocates nothing on the Go
// heap (its argument arrays are the call's, reused and cleared after each launch; the
// CPU device's are pooled): a small model's launches are its overhead. A kernel that reports an index out of range
// (devices.KernelError, KernelIndexOutOfRange) fails the call with an ErrInput naming
// the node and the index; a bounds-checked kernel that accessed an element outside a
// buffer (KernelOutOfBounds) fails it with an ErrOutOfBounds naming the kernel, the
// node, the buffer (input, output or the kernel's own allocation) and the offset.
// RunProfiled times each kernel (kiln bench --profile; a GPU kernel is waited for, so
// its time includes its run) by the wall clock; a Profile with a Clock times host
// kernels by it instead (the tuner's measuring child and kiln bench --roofline on one
// thread read the thread's CPU time).
//
// Devices and GPU kernels (accel.go): a tensor lives on one device (its storage's
// Device). A kernel runs on the device its binary was loaded on, and every argument
// must be there; a constant read by a kernel on another device is read from its copy
// there, made once: at load for each LoadConst whose register reaches a kernel
// argument (directly or through Move and ReshapeTensor), else at its first use.
// DeviceCopy moves a value to a new storage of the call on its device: within a device
// through Copy, else through host memory (CopyOut, CopyIn). A GPU kernel's entry has a
// KernelLaunch: grid and block extents over its runtime dims, evaluated per launch
// and passed to Launch; a grid extent of 0 skips the launch (no work), a negative one
// or a non-positive block is an error naming the kernel and the node, and one that
// overflows is an ErrInput. GPU launches do not wait: the call records them as pending
// and calls Sync on their device before any host read of a tensor there (builtins'
// arguments, If conditions, kernel dims, outputs, copies through the host) and on every
// such device before Run returns, so a kernel's status is the call's error, typed as a
// CPU kernel's (kernelError, naming the node of the pending launch the status names).
// A failed call still synchronizes before its storages return to the pool. Outputs on
// a GPU are copied to host tensors. A device reports kernel failures in one status
// block and Sync waits for its whole queue, so a call holds a GPU from its first launch
// there to its end (one lock per device across the process's VMs): calls launch on one
// GPU one at a time, and each sees only its own kernels' status. Memory per device: the pool cuts blocks at DeviceAlign (PlanAlign,
// or a device's BaseAlign (Aligner, e.g. OpenCL's) rounded up to a multiple of it),
// and PlanArenas is the static plan with one arena per device (Interval.Device, the
// AllocStorage's Device) at each device's alignment. Symbolic shapes: the shape
// builtins (builtins_shape.go) read symbols from input shapes (shape.dim), check that
// inputs agree on them (shape.expect, ErrInput) and evaluate polynomial extents and byte
// counts (shape.eval); AllocStorage takes a run-time byte count from a register and
// AllocTensorReg a run-time shape.
//
// Image storages (image.go): an AllocStorage with Shape [width, height] and DType f32
// or f16 is a 2-D image of width×height texels of four lanes on a device with
// devices.Imager (Imm is its width·height·texel bytes; no run-time size), and a
// DeviceCopy with such a Shape and DType copies its tensor into a new image of the
// call. A tensor in an image starts at offset 0 and its elements map row-major to the
// texels (element ((y·width)+x)·4 + lane: NCHW4c order); it may hold fewer bytes than
// the image, and a kernel may touch the image's width·height·4 elements (the launch
// check's capacity). Images are never sliced: copies and launches pass the image
// itself, copies reading or writing its first bytes; a copy of a tensor in an image to
// a buffer on its device is Copy when the tensor fills the image, else goes through
// host memory. The pool keeps free images per (device, width, height, format) and
// reuses one only for an equal request (a hit); they count in MemoryStats, the budget
// and TrimMemory like buffers. Verify refuses an image of other than two positive
// sides, of another element type, or with an AllocStorage size other than its bytes;
// a device without images fails the call naming the image.
//
// Sequences and optionals (adt.go, builtins_seq*.go, run_values.go): a register may
// hold a *Seq (an ONNX sequence: an immutable list of *Host tensors of one element type,
// each with its own shape) or an *Opt (a tensor, a sequence or nothing), as the Relay
// VM's ADT objects. The builtins that build and read them (seq.*, opt.*) are the VM's
// own, like mem.plan: bound at load, called with the registers' values (argument counts
// checked), and a tensor entering a sequence is copied to the host, so a sequence never
// aliases memory the static plan reuses. A position out of range, a sequence of mixed
// element types, a split that does not cover its axis or an empty optional read is an
// ErrInput naming the node (the instruction's Str). The signature's IOInfo.Kind says
// whether an entry input or output is a tensor, a sequence, an optional or an optional
// sequence (DType and Shape then describe each item; UnknownRank: any rank); RunValues
// takes and returns *tensor.Tensor, *SeqValue and *OptValue and checks every item's
// element type, rank and static extents (ErrInput); Run refuses a non-tensor output.
//
// Binary format (FormatVersion 9, see HeaderSize): a fixed header (magic, version, the
// CRC-32C and length of the metadata payload, the offset and length of the data section
// and its CRC-32C), the metadata payload (functions, the constant table, kernel table
// with each argument's element type and extent program and the launch geometry,
// binaries, builtins, signature (each entry's name, kind, element type, unknown-rank
// flag and shape), host calls; each constant is an element type, a shape and the
// offset and length of its bytes in the data section), zero padding to a DataAlign
// (64-byte) boundary, then the data section: every constant's raw little-endian bytes,
// each at a 64-byte aligned offset. DataOffset finds the split from the header, so a
// store can keep the small metadata compressed and the data section raw and page
// aligned in a file. MarshalBinary writes the whole; UnmarshalBinary reads it into
// copies; Decode(meta, data, backing) reads the two parts from separate memory and makes
// the constants alias data (tensor.FromNative: little-endian host, numeric element type,
// aligned address; else a copy), keeping backing reachable as long as the executable.
//
// Zero-copy start: Load binds an executable's aliased constants (Mapped) through
// devices.HostMapper where devs[0] has it, so constants mapped from a file reach a
// kernel without a copy (the CPU device reads them in place); otherwise constants are
// uploaded.
//
// Invariants: decoding untrusted bytes returns an error wrapping ErrFormat or ErrVersion
// (any other format version is ErrVersion: a cache miss), never panics, and
// never allocates more than the input can describe; both checksums are verified; the
// constants' byte ranges follow the canonical layout (in order, aligned, zero padding,
// no overlap, inside the data section), so a decoded executable re-encodes to the same
// bytes. Constants are never written: kernels only read them (launch refuses a constant
// as a kernel output), and aliased ones are valid while their executable is reachable;
// the caller of Decode keeps data valid and unchanged until then.
//
// References: TVM Relay VM (Roesch et al., "Relay: A High-Level Compiler for Deep
// Learning", 2019; the VM design document).
package vm
