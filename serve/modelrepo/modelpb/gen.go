// Package modelpb is the Go code generated from model_config.proto, kiln's own
// transcription of the part of Triton Inference Server's model configuration schema that
// kiln acts on (proto package inference; names and field numbers are Triton's, so
// config.pbtxt files and gRPC ModelConfig messages are interchangeable with Triton's).
// Regenerate with go generate; requires protoc and protoc-gen-go on PATH.
package modelpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative model_config.proto
