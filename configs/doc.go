// Package configs reads, defaults and validates the server's configuration file
// (docs/ARCHITECTURE.md, "Layers"; layer 0). Only cmd/... imports it (internal/archtest checks
// this): the libraries take typed options that the command fills from the File it
// returns. Model configurations (config.pbtxt) are the model repository's, in
// serve/modelrepo.
//
// File is YAML (gopkg.in/yaml.v3 with KnownFields, so a misspelt key is an error).
// LoadFile starts from DefaultFile and overrides what the file sets; the command then
// applies its flags (a flag given on the command line overrides its key) and calls
// Validate, which reports every bad value by its dotted key. Sizes are bytes or a
// number with a unit ("64MiB", "2GiB", "1.5GB"); durations are Go duration strings.
// Beside the package: kiln.yaml, the commented example of every key, and k8s/, the
// Kubernetes manifests; the tests check both against File and against each other.
//
// Invariants: every error about the config file wraps ErrServerConfig (a *KeyError
// from Validate); the file is bounded (MaxFileBytes); nothing here panics on any input.
//
// References: the YAML 1.2 specification; Triton Inference Server's command-line
// options (the keys' meanings and defaults follow them where they overlap).
package configs
