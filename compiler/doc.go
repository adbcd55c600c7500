// Package compiler drives a whole compile: graph.Module → vm.Executable
// (docs/ARCHITECTURE.md, "The pipeline", phases 2 to 8; layer 6). JIT is the compiler as
// package engine's Compiler: engine owns the journal lookup of whole executables and
// calls it on a miss.
//
// Options: Recipe (engine.Recipe) is every option that changes the generated code — the
// graph optimization level, fusion, layout, bounds checks, textures and the precision of
// matrix products — resolved once: Pipeline
// derives the graph pipeline from it, and engine keys the journal with the same value's
// String, so the key and the compile cannot disagree. The other Options (Dims, Jobs,
// Progress, Check, dumps, Context, Timeout, Graph, Limits, Backends, Cache) do not change
// the code.
//
// The backend table (backend.go): everything the compile does differently per kind of
// target is one Backend value — the strategy table built from the op registry, the
// alter-layout and annotate-scopes policies, the loop-IR pipeline, the codegen Dialect and its options, the
// build that turns the unique kernels' sources into the binary the executable carries,
// the binary's device name and fingerprint, and the memory scopes a tensor may be in.
// Build looks the target's kind up once in Options.Backends (nil: DefaultBackends, the
// CPU, OpenCL and CUDA) and fails with ErrNoBackend ("no backend for target cuda") for a kind
// without an entry; no other code tests the kind, so a new target is one new Backend
// value with its strategies (TestSecondBackendIsOneTableEntry adds one). The CPU's
// entry (CPUBackend, backend_cpu.go): kernels/cpu's strategies and channel-blocked
// layout policy, loopir/passes.CPUPipeline, codegen.CDialect with the thread pool
// linked from the C runtime, kernels built by the C compiler of Options.CPU, and
// every tensor in global memory. OpenCL's (OpenCLBackend, backend_opencl.go):
// kernels/gpu's strategies, loopir/passes.GPUPipeline, launch geometry derived from the
// bound loops and verified against the device (Launches), codegen.OpenCLDialect, every
// GPU kernel in one program built by Options.GPU (a ProgramBuilder) with -w, its
// program binary in the executable. CUDA's (CUDABackend, backend_cuda.go): the same
// strategies, pipeline and launches, codegen.CUDADialect, no texture path, every GPU
// kernel in one translation unit that Options.GPU (a PTXBuilder: a GPU, or the
// compile-only architecture devices/cuda.Offline) compiles to PTX with NVRTC, the PTX in
// the executable.
//
// Precision: Recipe.Precision tf32 puts the backend's TensorCores strategies ahead of
// its own (placement.go). CUDA's (CUDABackend, cudaTensorCores) is kernels/gpu's
// gpu-matmul-mma over intrin.MMAs: float32 MatMul and Gemm on the tensor cores of sm_80
// and later with operands rounded to TF32 (10-bit mantissa) and float32 accumulation,
// relative error about 1e-3; below sm_80, and for what the rule refuses, the exact
// float32 rules build the node. The CPU and OpenCL backends have none and build exact
// float32 whatever the precision (the recipe still keys the journal apart). Build
// refuses a precision engine.ParsePrecision does not accept (fp16: not built).
//
// Placement (placement.go): a backend that Launches compiles for two devices, the CPU
// (device 0: inputs, host builtins, constants; the CPU backend's strategies for
// target.Host()) and the GPU (device 1). A node's kernel is lowered on the GPU first and
// on the CPU when the GPU refuses it (the kernel's Group says why); a fused group the
// GPU cannot fuse runs as its members when the GPU takes the anchor, else fused on the
// CPU. The emitter tracks each register's device and copies a kernel's argument from
// another device (DeviceCopy, once per value on the straight-line part); constants are
// read where they are (the VM places them); control flow carries values on the CPU;
// planned tensors get one arena per device (vm.PlanArenas). A GPU kernel is its code,
// its argument extents and its launch: two grids over one body are two kernels.
//
// Stages, each reported through Options.Progress and each recovering a panic into an
// error that names the stage and the node or kernel:
//
//  1. passes — Pipeline(Options.Recipe) (or Options.Passes, for tests of the passes) on
//     a clone of the module: symbolic dims bound to the values given in Options.Dims
//     (engine.DimsFromInputs derives them from concrete inputs), constants folded on the
//     host with the reference evaluator (shape arithmetic over the symbols left unbound
//     becomes kiln.ShapeExpr), dead code removed, fuse-ops, and (unless
//     Recipe.PlainLayout) alter-layout with the backend's policy: on the CPU
//     convolutions exchange channel-blocked tensors. With a texture path (the
//     backend's Textures, the device has images, Recipe.NoTextures off: textures.go)
//     its layout policy replaces the backend's and annotate-scopes runs with its scope
//     policy (TextureScopes: the device's image2d limits, which Recipe.TextureLimit
//     lowers); otherwise every tensor is global. Options.Scoped hears each texture
//     decision. A tensor left in a memory scope the backend does not allow is an error.
//     The emitter follows each kernel's parameters, not the graph: an output a kernel
//     writes as a texture gets an image (allocImage), and a value in an image read by
//     a kernel that takes a buffer (or the reverse) is copied (asImage); Stats.Tensors
//     records where each kernel output lives.
//  2. lower — every node that computes becomes a kernel through the backend's strategy
//     table: compute definition, schedule, the backend's loop-IR pipeline, its dialect.
//     Kernels are deduplicated by their generated code, so repeated layers compile
//     once, and before that by their structure (kernelkey.go: ops, attributes, types
//     and constants of the group), so repeated layers are lowered once too. Each group
//     fuse-ops formed (a kiln.Fused node; none when Recipe.NoFusion drops the pass) is
//     lowered as one kernel by its anchor's strategy, the other members as epilogues
//     (fused.go). Constant inputs a strategy wants in another layout are repacked here,
//     once.
//     View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) become zero-copy
//     ReshapeTensor instructions; If and Loop are inlined into the entry function as
//     If/Goto code (the subgraphs read enclosing values directly, so no closure is
//     needed; an If whose condition is a constant is its taken branch alone, and a
//     kiln.Fail, which stub-branches puts in a branch that does not type for the bound
//     shapes, is a Fatal instruction naming the If and the branch), with loop-carried
//     values in registers and the trip count kept by the VM's
//     standard builtins; a Loop's scan outputs are stacked on the host one row per
//     iteration (scan.append, scan.finish); Scan runs the same way over its inputs'
//     slices (scan.slice, either direction; scan outputs along axis 0, forward).
//     Sequences and optionals (sequence.go) are VM values: their ops become the VM's
//     seq.* and opt.* builtins (Identity of one a move), an item read out is a host
//     value whose symbols are bound from its shape (or checked, shape.expect), a Shape
//     of an item reads it at run time (ShapeOf), and SequenceMap is a loop over its
//     body like Loop, each sequence input's item at the position binding the body's
//     parameter and the body's symbols bound afresh per item; control flow carries
//     sequences and optionals in registers as it does tensors. The entry signature
//     records each input's and output's kind (vm.IOKind).
//  3. build — the backend's Build turns the unique kernels into one binary (a
//     BuildJob gives it the journal's per-unit object cache and progress). On the CPU
//     each kernel is compiled to its own object by the C compiler, as many at a time as
//     Options.Jobs, then linked with the C runtime (thread pool) into one shared
//     object, carried inside the executable.
//  4. plan — the static memory plan: every tensor the straight-line part of the entry
//     function allocates gets an offset in one arena (vm.PlanMemory over the tensors'
//     lifetimes, views sharing their base's lifetime, values read inside a loop kept
//     alive to its end). Tensors allocated inside control flow get their own storage.
//     The executable carries the binary under the backend's device name and
//     fingerprint.
//
// Bounds (limits.go): before any work the graph is checked against Options.Graph
// (nodes, inputs per node, inputs in all, subgraph nesting; the defaults are well above
// the largest real models), and an excess is an error wrapping ErrTooLarge. The graph
// passes are O(n log n) (graph/passes), so what a compile costs grows with the kernels it
// builds. Options.Timeout bounds the whole compile and Options.Context cancels it; both
// are checked before each stage, between graph passes and between the nodes
// fold-constants evaluates, between the nodes lowered, and the C compilers of the build
// stage run under the context (killed when it ends). The error wraps ErrCompile and the
// context's cause (ErrTimeout with context.DeadlineExceeded, or context.Canceled) and
// names the model (Options.Name), the stage and, while lowering, the node.
//
// Kernel objects in the journal (jit.go): with Options.Cache, each kernel's object is
// looked up before the C compiler runs, under a key of its source digest, the target and
// device fingerprints, the backend's Toolchain (the C compiler's version, flags and what
// -march=native resolves to) and the schema versions, so a kernel shared by models, or
// by compiles of one model, is built once. The toolchain is in these keys only: whole
// executables are keyed by package engine, without it (an executable runs the same
// whichever compiler built its kernels).
//
// Symbolic dims (symbolic.go): symbols left unbound are compiled generically — one
// executable for every value. The entry function reads each symbol from the first input
// whose shape names it and checks later inputs agree (a mismatch is vm.ErrInput);
// ShapeExpr values, extents of symbolic tensors and their byte counts are polynomials
// evaluated on the host (the shape.eval builtin); kernels take the symbols they use as
// runtime dims; a tensor of a symbolic shape gets a storage of its own sized at run time
// (the static plan covers the static tensors only), returned to the VM's pool after its
// last use (a KillRegister, so later tensors of the same call reuse the memory).
//
// Value-dependent shapes (hostshape.go): a node whose shape, sizes, axes, repeats, pads,
// starts/ends or depth operand is not a constant (Reshape, Squeeze, Unsqueeze, Expand,
// Tile, ConstantOfShape, Range, the window functions, Slice, Pad, Split, OneHot, the
// Reduce* family, STFT's frame step and length, MelWeightMatrix's operands, DFT's
// dft_length) has outputs with fresh symbols. Before it runs, its host shape function
// (a vm builtin over the input's shape and the operand read on the host, from the CPU)
// computes the output's extents; each fresh symbol is bound to its extent (shape.dim) and
// every extent the graph knew is checked against it (shape.expect), so a bad value in a
// request is a vm.ErrInput naming the node. The symbols then serve like the inputs':
// views reshape to them, kernels take them as runtime dims (the operand that also moves
// the indexing, a Slice's starts or a Pad's pads, is read by the kernel itself) and the
// rest of the graph compiles over them. In a fused group the members' functions run
// before the kernel, unless one reads a value computed inside the group (then the
// members are lowered one by one). A reduction over run-time axes that drops them runs
// as its kept form and a view. Storages sized by such symbols are checked when they
// are allocated, not by the prologue's mem.plan. A dim no host function determines (a
// Loop-carried shape) is a compile error naming it, as is a symbolic tensor in a
// channel-blocked layout.
//
// Host ops (hostop.go): a node whose op is in the host op table (by graph.Op, with a
// test for ops that run on the host only in some uses) is one vm.CallHost: its present
// inputs (the call's slots say which), its attribute struct encoded field by field
// under the ONNX names, and a GetField per output; each output's fresh symbols are bound
// from the result's shape and its known extents checked (shape.expect), as for host
// shape functions. Text runs there (hostop_strings.go: StringNormalizer,
// TfIdfVectorizer, every Cast or CastLike to or from strings), since a string tensor has
// no device layout, and so do the random ops (RandomNormal, RandomUniform, their Like
// forms, Bernoulli, Multinomial: vm's generator, shared with the reference evaluator); graph fusion leaves any node with strings in or out alone. Shape inference takes symbols to be at
// least 1 where ONNX gives 0 a meaning of its own (a Reshape entry 0).
//
// Sizes and limits: every static tensor's byte count is checked (tensor.CheckedBytes)
// and, like the static plan's arena, compared with Options.Limits (zero fields:
// vm.DefaultLimits); a tensor over them is a compile error naming it and its node. The
// limits are checked again by the VM when it loads an executable, so they are no part
// of the cache key. A generic executable calls vm.BuiltinMemPlan right after the
// prologue that binds the symbols: a shape program giving, for every run-time sized
// tensor of the straight-line part, the bytes held when it is allocated (the tensors
// allocated before it and not yet freed, results kept) and its own bytes, so a request
// over the limits is refused before any kernel runs. Allocation, kernel and storage
// instructions carry the tensor and node they are for in their Str, for the VM's
// errors. Each kernel's table entry lists the elements it may touch through each
// parameter (the lowered buffer's extent, as a vm.Extent over its runtime dims), which
// the VM checks at every launch.
//
// Bounds-checked builds: Recipe.BoundsCheck emits every kernel with each buffer access
// checked against the buffer's extent (codegen.COptions.BoundsCheck), a debug build for
// finding compiler bugs (`kiln compile|run|bench|conformance --bounds-check`, and the
// zoo tests of cmd/kiln/internal/conformance). An access outside a buffer fails the call
// with vm.ErrOutOfBounds naming the kernel, the node, the buffer and the offset. The
// recipe names it in the executable's key (only when on), and the checked kernels'
// sources differ, so a checked build shares no journal entry with a default one.
//
// Invariants: the input module is never modified; an executable that compiles has a
// signature (input/output names, dtypes, shapes; -1 for a symbolic extent) that the VM
// checks requests against, so a kernel compiled for static extents never sees other
// extents.
package compiler
