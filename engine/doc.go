// Package engine owns "model → executable through the journal → loaded VM" for one
// target: the seam between the runtime (serve, the CLI) and the compiler.
//
// Model: an Engine is configured once (Config) with the target, the device executables
// run on, the journal, the Recipe and, in a full build, a Compiler (package compiler's
// JIT). A Model is one model version read once (Open: interface, signature, digest and
// stamp from the same bytes); Executable returns its executable for a set of input
// shapes (or the generic one, every shape) from the journal or compiled into it; Load
// also loads it into a VM (a Runner; a ValueRunner, RunValues, for an entry that takes
// or returns sequences and optionals). Every caller — `kiln serve` (through serve.Engine), prebuild,
// run, compile, bench, inspect, the conformance runners, bench/soak — goes through it.
//
// Recipe is every option that changes the generated code (graph optimization level,
// fusion, layout, bounds checks, textures, the precision of matrix products: Precision,
// fp32 exact or tf32 on CUDA tensor cores, checked by ParsePrecision), resolved once: its
// String is the "options" part of the journal key (a tf32 build never answers an fp32
// request) and the compiler derives its pipeline from the same value
// (compiler.Pipeline), so the key and the compile cannot disagree.
//
// Keys (key.go): an executable's entry is keyed by the model's digest, the canonical
// input shapes, the recipe, Identity (this build's compiler sources, identity_gen.go,
// refreshed by `go generate ./engine`), the target's and the device's fingerprints, the
// tuning records and the schema versions. The C toolchain is not part of it: an
// executable runs the same whichever compiler built it, and leaving it out lets a build
// without a compiler compute the key. Kernel objects, which the toolchain does shape,
// are keyed by it (package compiler).
//
// Plans (plan.go): a compile through the journal also stores its Stats beside the
// executable (KindPlan, the executable's key material), so Plan reports the kernels,
// strategies and memory of an executable taken from the journal; the executable itself
// does not carry them. A journal that refuses the plan loses the report only.
//
// Tuning (tuning.go, workloads.go): a compile applies the journal's tuning records
// measured on the engine's target and device fingerprint and at its thread count
// (Threads; Config.Records replaces the journal's, Config.NoTuning ignores them),
// narrowed to the records of the model's own kernels and resolved once per Executable
// call: the same records go to the compile (Job.Tuning) and, as their digest, into the
// key's "tuning" component ("none" without records, so an untuned key is the key of a
// kiln without a tuner, and a record of another model's kernel leaves the key alone).
// The model's kernels come from a KindWorkloads entry every journal compile stores
// beside the executable (the executable's material without its tuning component);
// without it, a compiling engine compiles once with all the records under that entry's
// build lock and publishes the executable under the narrowed key before the list.
//
// Serve-only: an Engine without a Compiler takes executables from the journal only;
// a miss is ErrNotPrebuilt naming the model, the shapes, the entry's key and why the
// journal has none (the closest entry and the components that differ). `go build -tags
// serveonly ./cmd/kiln` links this half only.
//
// Invariants: an executable is compiled only from the bytes its model digest names
// (onnx.LoadVerified: replaced files are onnx.ErrChanged, never compiled under the old
// key); an entry that passes the journal's checksums but does not decode is invalidated
// and rebuilt once; Config.Timeout bounds the wait, the compile and the load together
// (ErrTimeout with context.DeadlineExceeded).
package engine
