// Package inferencepb is the Go code generated from grpc_service.proto, kiln's own
// transcription of Triton Inference Server's gRPC service for the Open Inference
// Protocol (proto package inference; service, message and field names and numbers are
// Triton's). ModelConfigResponse carries serve/modelrepo/modelpb's ModelConfig, imported as
// "model_config.proto" exactly as Triton's file imports it, so that the descriptors
// served through reflection resolve. Regenerate with go generate; requires protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH.
package inferencepb

//go:generate protoc -I . -I ../../../serve/modelrepo/modelpb --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_service.proto
