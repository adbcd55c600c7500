// Package serve is the protocol-neutral inference service (docs/ARCHITECTURE.md,
// "Serving"; layer 7): the model repository, each model version's lifecycle, inference,
// metadata, statistics and health. serve/httpapi and serve/grpcapi translate the Open
// Inference Protocol to and from it and do nothing else.
//
// Engine. The service turns a model version into something that runs only through the
// Engine interface (engine.go, Options.Engine): Open reads a version's file once, Load
// returns its executable for a set of input shapes (nil: the generic one) loaded and
// ready to run, JournalStats feeds the metrics. kiln serve passes package engine's
// *Engine (with the compiler, or serve-only with prebuilt executables); the protocol
// tests pass serve/servetest's, which runs the reference evaluator and needs no C
// compiler. So serve imports neither the compiler, the graph passes nor a concrete
// device (internal/archtest enforces it).
//
// Instances and devices (instances.go). Options.Engine is the CPU's engine and
// Options.GPUs the GPUs' (by ordinal: kiln serve gives the CUDA GPUs, cuda:N for gpus:
// [N], or without them the OpenCL devices in kiln's numbering, opencl:N). A model
// version's instance groups become instances on devices, as Triton places them: a
// KIND_CPU (or KIND_MODEL) group's count on the CPU; a KIND_GPU group's count on each
// GPU it lists, or on every GPU when it lists none; KIND_AUTO is KIND_GPU when the
// service has a GPU, else KIND_CPU. A group asking for a GPU the service does not have
// (none at all, or an ordinal past the list) is served on the CPU with a warning naming
// the model and the ordinal; it never fails the model. Each device of a version holds
// its own executables (a placement: per shape signature, the generic one, the
// specialization counts), loaded once from that device's engine whatever the number of
// instances on it; the journal keys them apart by target. All instances of all devices
// wait in one queue of free instances: a request (or a batch) takes the first free one
// and runs on its device, compiling for that device first if it has to. A failed first
// compile on any device is the model's load error (UNAVAILABLE, the reason naming the
// device). Loads at start and warm-up samples run on every device of the version.
// kiln_device_exec_count counts executions per model version and device.
//
// Model. A repository in Triton's layout (<repo>/<model>/<version>/model.onnx) is
// scanned at start; every version becomes a model whose interface (inputs, outputs),
// content digest (the journal key's model part) and file stamp (size, mtime, inode) come
// from one read of its file (Engine.Open), without loading the model. A compile imports
// the files only through onnx.LoadVerified (inside the engine), which refuses bytes other
// than the digest's, and a stamp that no longer matches before a compile means the files
// were replaced: the model is read again (reloadChanged) and the request runs on the new
// content. So an executable is never stored under the key of other content.
//
// A model compiles at start or on its first request, as Options.LoadMode says
// (startup.go: lazy, eager or background), through the engine and its binary journal:
// once per input-shape signature, once per process (singleflight) and once across
// processes sharing the journal; a request that comes while its executable compiles
// waits for that compile and its response says how long (InferResponse.CompileWait,
// the kiln-compile-wait-ms header). With Options.SpecializeAfter > 0 (kiln serve's default, 3) a
// model with free input dims is served from one generic executable (specialize.go:
// compiled with the symbolic dims left free, so a new shape compiles nothing); a shape
// signature requested that many times gets an executable of its own, built in the
// background (static shapes, full memory plan) and used from then on, while the
// requests before it run generically; a request the generic executable refuses
// (vm.ErrGenericShape: free dims that meet and differ) waits for the executable of its
// shapes (runVariant). Shapes under which a node does not type (graph.ErrInfer when
// they are bound) are an invalid request: the model's state stays. A model whose
// generic executable cannot be built (a kernel without run-time extents, a dim that
// depends on data) compiles per signature, as it always does with SpecializeAfter 0:
// each new signature compiles before its first answer. Lifecycle: UNAVAILABLE
// (unreadable model, failed compile: the reason is kept) / LOADING (compiling, with
// progress) / READY. Readiness (Ready) is strict, as Triton's: the server is unready
// while draining, while a load at start that readiness waits for runs (LoadEager,
// warm-up), and while a model that should serve has failed (Options.LenientReadiness
// ignores those); a compile for a request or in the background never makes it unready.
//
// Invariants: every error returned wraps one of ErrInvalid, ErrNotFound,
// ErrUnavailable, ErrInternal, ErrDisabled or ErrDeadline and names the model, input or
// output concerned; a bad request or a bad model never takes the service down; a
// compile runs detached from the request that started it and stops when every request
// waiting for it has given up (flight.go: background compiles are never stopped that
// way); Options.Compiles compiles run at once (default one per core), so one slow model
// does not hold back the others;
// a model version runs at most as many requests at once as it has instances, over all
// its devices, the rest queue (the queue time is in its statistics); after Drain no inference is admitted and Drain
// returns when those in flight are done; background tuning never runs beside an
// inference (its work stops when one arrives) and never fails or delays one.
//
// Repository: serve/modelrepo owns the repository's layout (which folders are models
// and versions, the names, the file checks), config.pbtxt (parse, auto-complete,
// validation, the JSON rendering) and the one table of OIP datatypes; the service reads
// the repository through it (repository.go), as kiln prebuild does.
//
// Configuration: <model>/config.pbtxt (Triton's fields, modelrepo.ReadModelConfig)
// completed from the model as Triton's auto-complete does (modelrepo.AutoComplete:
// name, platform, inputs and outputs without the batch dim when max_batch_size > 0, one
// CPU instance group of Options.Instances, version policy latest 1), validated, and
// checked against the model (modelrepo.CheckAgainstModel, then max_dims); a config that
// does not parse, contradicts the model or sets a Triton field kiln does not implement
// makes the model UNAVAILABLE with the reason (naming the field). The load API may give
// the configuration instead (LoadModelWithConfig, Triton's load parameter "config" in
// JSON); the versions it loads keep it, so a reload after their files change uses it
// again, and default_model_filename names each version's file (repository.go).
//
// Tensors as configured (tensorio.go, classify.go): an input or output with a reshape is seen by
// clients in the config's dims (requests are checked against them, metadata reports
// them) and by the model in the reshape's shape; inputs are reshaped before the
// request reaches the model (and its batcher), outputs after. An output's
// label_filename is read at load (a missing file makes the model UNAVAILABLE); an
// output requested with the parameter classification: K is answered with Triton's
// classification extension: BYTES, [K] or [batch, K], each "<value>:<index>[:<label>]"
// with the value as C's %f prints it.
// The version policy selects the versions served. instance_group counts are the
// requests run at once, on the groups' devices; dynamic_batching with max_batch_size enables the batcher
// (batcher.go): requests agreeing on all but the first dim join within the queue delay,
// run padded to the smallest preferred size that holds them (so only preferred sizes
// compile), and are split back. The batcher's queue (queue.go) follows Triton's
// priorities and queue policies: priority_levels levels, 1 served first, a request's
// "priority" parameter choosing its level (0 or past the levels: default_priority_level);
// per level (default_queue_policy, or its priority_queue_policy) max_queue_size refuses
// a request beyond it at once (ErrUnavailable, "Exceeds maximum queue size"), and a
// request waiting past its timeout (default_timeout_microseconds, shortened by its
// "timeout" parameter only with allow_timeout_override) fails with ErrUnavailable
// "Request timeout expired" (REJECT) or runs after its level's unexpired requests
// (DELAY). A request whose caller gives up leaves the queue. The parameter compile:
// "eager" compiles at start, and readiness waits for it, whatever Options.LoadMode.
//
// Statistics (stats.go) are Triton's: a successful request's whole time in the service
// splits into queue, compute_input (inputs checked and put in the model's order and
// shapes; a batch's join), compute_infer and compute_output (a batch's split, the
// outputs picked, reshaped, classified); inference_count counts rows for a model with
// max_batch_size > 0 and requests otherwise, execution_count runs of the model, and
// batch_stats the runs per batch size (1 for a model without a batch dim). The
// metrics (metrics.go) read them at scrape time, with Triton's names, and
// nv_inference_pending_request_count counts the requests waiting for an instance or in
// the batcher's queue; an unloaded model's series are gone.
// When max_batch_size, fixed config dims and the parameter max_dims ("seq=512")
// bound every free dim, the generic executable's memory pool is sized for those bounds
// by one inference on zeros when it is built (bounds.go): requests up to the bounds
// then allocate nothing.
//
// model_warmup samples compile and run before the model turns READY (warmup.go);
// explicit model control loads and unloads models by API (repocontrol.go).
//
// System shared memory (sharedmem.go, Triton's extension): clients register regions
// (a name, a key naming a POSIX shared memory object under Options.SharedMemoryDir,
// /dev/shm by default, an offset and a byte size) and name them in an inference's
// inputs and outputs instead of sending data. The key is a name, never a path
// (validKey); the object is opened once with O_NOFOLLOW relative to the directory and
// must be a regular file (fstat on the descriptor); regions are read and written with
// pread/pwrite, bounds checked without overflow against the region and, on every
// access, against the object's size then, so an object truncated by its owner fails
// that request with ErrInvalid and never faults the process (a mapping would SIGBUS).
// Inputs are copied out before the model runs. A request holds its regions; one
// unregistered meanwhile closes when the last request holding it ends. CUDA shared
// memory is refused by name.
//
// Sequences (sequence.go, seqbatch.go, seqrun.go): sequence_batching with its
// requests' sequence_id, sequence_start and sequence_end parameters. A sequence's
// requests run one at a time, in order; the server gives the model the control inputs
// (START, END, READY, CORRID) and the implicit state (each state output kept per
// sequence, without the batch dim, and given back as its input on the next request;
// the initial state on the first), so neither is a configured input or output.
// Started sequences hold a place, a slot of an instance's lane (direct) or a candidate
// place (oldest), and more wait in a backlog in order; a batch is one request of each
// ready place (direct: of one lane, gaps padded with READY false; oldest: the oldest
// requests), rows of equal shapes only. A sequence idle past
// max_sequence_idle_microseconds is released. Invariants: a request of a sequence
// runs only after the previous one has finished and its state is stored; a state is
// replaced, never modified in place; a request whose client gave up still runs in its
// turn, so that the state is what the sequence's requests made it.
//
// Optional inputs: an input the model has a default for (an initializer of the same
// name, onnx.NamedType.Default) is optional in the completed config; config.pbtxt may
// mark optional only such an input (checkAgainstModel refuses the others, naming
// them). A request (or a warm-up sample) that omits an optional input runs with the
// default; omitting any other input is ErrInvalid naming it (checkInputs).
//
// Background tuning (idle.go, tunebg.go, tunedswap.go; Options.Tune, off without a
// Tuner). Every execution of requests counts for its model version (name, version,
// content digest) and shape signature (variantWaiting); loads at start and warm-up
// samples do not. The server is idle when no inference has been
// in flight or queued (Service.enter to leave) for TuneOptions.IdleAfter; the idle gate
// admits background work only then, and hands it a context that the next inference's
// arrival ends (a pause: the work is thrown away and made again at the next idle time),
// with an optional duty cycle (after work that took d, it rests (1-Duty)/Duty·d). One
// goroutine tunes, one session at a time, the version executed most that is not tuned
// yet, through the Tuner, for its most executed shapes; the Tuner's measurements run
// under the gate. When a session wrote records, rebuildTuned registers the model again
// from the repository as a reload does, builds on each new version, under the gate,
// what the old one had loaded (its generic executable and its specialized ones for the
// known signatures: the journal keys them with the new records' digest, so they
// compile anew), times old against new on zero inputs (kiln_tune_speedup) and replaces
// the versions (replace): new requests take the new executables, those in flight finish
// on the old ones, which close after them; statistics carry over. Nothing is swapped
// when the model was reloaded meanwhile or its files, versions or placements changed.
// A version is tuned once per digest. Metrics: kiln_tune_trials_total{model,outcome},
// kiln_tune_speedup{model}, kiln_tune_swaps_total{model}, kiln_tune_running.
//
// Refused by name, not built: iterative sequences, ragged batches.
//
// Names (names.go, modelrepo.ValidModelName): a model name from a client, a flag or the
// repository is one validated path element whose folder, symlinks resolved, is inside
// the repository; below it the operator's symlinks are followed, but what a model or its
// configuration names (external data, warm-up data) stays inside its own folder, and
// every file the service opens is opened as a regular file only (internal/safefile). A
// shared memory region name follows the model names' rule, and a shared memory key is
// one file name in the shared memory directory (sharedmem.go). Any other name gets one
// fixed refusal, and only valid names reach logs and metric labels.
// FuzzNamesAreNotPaths checks model names, region names and keys.
//
// References: the KServe Open Inference Protocol (REST and gRPC), Triton's model
// repository, model configuration, statistics and shared memory extensions; POSIX
// shm_open(3).
package serve
