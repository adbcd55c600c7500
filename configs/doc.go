// Package configs reads, defaults and validates kiln's two kinds of configuration
// (ARCHITECTURE.md §2, layer 0): the server's config file and Triton-style model
// configurations (config.pbtxt). Only cmd/kiln imports it; the libraries below take
// typed options built from what it returns. Its subpackage modelpb (the generated
// messages, layer -1 in internal/archtest) is also what serve and the gRPC API pass a
// model's configuration around as.
//
// Model configurations. modelpb is kiln's transcription of the part of Triton's
// model_config.proto that kiln acts on, under Triton's proto package, names and field
// numbers, so an existing Triton repository's config.pbtxt parses unchanged and the
// message is wire-compatible with Triton's gRPC ModelConfigResponse. ParseModelConfig
// reads text format; Triton fields kiln does not transcribe (optimization,
// sequence_batching, ensemble_scheduling, response_cache, ...) and unknown fields are
// dropped, and each one is returned as a warning naming it and its line, so the server
// logs what it ignores instead of refusing a model Triton would serve.
// ValidateModelConfig applies Triton's rules that make sense for kiln (see its comment
// for the departures); ModelConfigJSON renders the JSON of Triton's REST config
// endpoint; DataTypeToOIP and DataTypeFromOIP map Triton's data types to the Open
// Inference Protocol's datatype strings.
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
// Server config file. File is YAML (gopkg.in/yaml.v3 with KnownFields, so a
// misspelt key is an error). LoadFile starts from DefaultFile and overrides what the
// file sets; Validate reports every bad value by its dotted key. Sizes are bytes or a
// number with a unit ("64MiB", "2GiB", "1.5GB"); durations are Go duration strings.
//
// Invariants: every error about a model configuration wraps ErrModelConfig (as a
// *SyntaxError or *FieldError), every error about the config file wraps
// ErrServerConfig (a *KeyError from Validate); inputs are bounded
// (MaxModelConfigBytes, MaxFileBytes); nothing here panics on any input.
//
// References: Triton Inference Server's model_config.proto and model configuration
// documentation (triton-inference-server/common and /server), Triton core's
// model_config_utils.cc (the validation rules and the JSON rendering), the KServe
// Open Inference Protocol (datatype strings), the protobuf text format specification.
package configs
