// Package modelrepo is the serving side's model repository in Triton's layout
// (docs/ARCHITECTURE.md, "Serving"): which folders are models and versions, model names, each
// model's config.pbtxt (parse, auto-complete, validation, Triton's JSON rendering), and
// the one table of tensor datatypes the Open Inference Protocol carries. serve and kiln
// prebuild read a repository only through it, so both see the same models. Its
// subpackage modelpb holds the generated messages, which serve and the gRPC API pass a
// model's configuration around as.
//
// Layout. <repo>/<model>/<version>/model.onnx and an optional <repo>/<model>/config.pbtxt.
// Root.Scan lists the models: a model is a directory inside the repository (symlinks
// resolved) whose name passes ValidModelName (one path element of at most 255 bytes of
// UTF-8, no control characters, separators or leading dot); its versions are the
// folders whose names are canonical decimals (ParseVersion: "1", not "01" or "+1")
// holding a regular file model.onnx, or the file the config's default_model_filename
// names (a plain file name; ScanModelFile takes it from the caller instead). Below a model folder the operator's symlinks are
// followed; what a client names stops at the model folder. Hidden entries and entries
// that are not directories inside the repository are passed over; an invalid folder
// name, or a model folder without a usable version, is returned as a warning so that a
// typo is visible. Root.ScanModel reads one model; any name that is not a model folder
// of the repository gets the one refusal ErrUnknownModel, which reveals nothing about
// the file system.
//
// Model configurations. modelpb is kiln's transcription of the part of Triton's
// model_config.proto that kiln acts on, under Triton's proto package, names and field
// numbers, so an existing Triton repository's config.pbtxt parses unchanged and the
// message is wire-compatible with Triton's gRPC ModelConfigResponse. ParseModelConfig
// reads text format (ReadModelConfig: from a model's file); Triton fields kiln does not
// transcribe (optimization, ensemble_scheduling, response_cache, ...)
// and unknown fields are left out of the result and each is returned naming it and its
// line: the server refuses such a config, since a field silently ignored would change
// what the model answers. ParseModelConfigJSON reads the JSON the load API takes, with
// the same refusal (an unknown-field error). AutoComplete fills in what a config
// leaves out from the model's interface, as Triton's auto-complete does (an input with
// a default is optional, and added, optional, to a config that lists only others);
// ValidateModelConfig applies Triton's rules that make sense for kiln and refuses, by
// field, what kiln transcribes but does not implement (see its comment);
// CheckAgainstModel checks a config's inputs and outputs against the model's, through
// their reshapes; ModelConfigJSON renders the JSON of Triton's REST config endpoint.
// sequence_batching's control inputs and state inputs are model inputs the server
// fills and its state outputs model outputs the server keeps (sequence.go): they are
// never configured inputs or outputs, auto-complete leaves them out, and
// CheckAgainstModel checks them against the model's types.
//
// Datatypes. One table (datatype.go) relates the protocol's datatype strings ("FP32",
// "BYTES"), kiln's element types and Triton's config data types; DataTypeToOIP,
// DataTypeFromOIP, DTypeFromOIP and DTypeToOIP all read it.
//
// How unknown fields are named: the protobuf text decoder can skip unknown fields but
// not say which ones. ParseModelConfig first parses with unknown fields discarded (so
// syntax errors come from the decoder, with its line and column), then walks the text
// against the descriptor to find the unknown fields and their extent, blanks them out
// (keeping newlines, so positions stay right) and parses strictly, which also rejects
// unknown enum names in known fields. The walk only splits tokens, on input the
// decoder has already accepted; the fuzz test checks that its result always equals
// the lenient parse.
//
// Invariants: every error about a model configuration's text or fields wraps
// ErrModelConfig (as a *SyntaxError or *FieldError); inputs are bounded
// (MaxModelConfigBytes); nothing here panics on any input; a model folder it returns
// is a directory inside the repository once symlinks are resolved.
//
// References: Triton Inference Server's model repository, model_config.proto and model
// configuration documentation (triton-inference-server/common and /server), Triton
// core's model_config_utils.cc (the validation rules and the JSON rendering), the KServe
// Open Inference Protocol (datatype strings), the protobuf text format specification.
package modelrepo
