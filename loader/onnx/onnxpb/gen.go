// Package onnxpb is the Go code generated from onnx.proto, kiln's own transcription of the
// ONNX IR schema (field numbers follow the specification). Regenerate with go generate;
// requires protoc and protoc-gen-go on PATH.
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative onnx.proto
