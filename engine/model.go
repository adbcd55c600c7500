package engine

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
)

// Model is one model version as the engine sees it: read once (Open), then compiled
// and loaded any number of times by its digest. A Model is immutable.
type Model struct {
	// Name labels the model in errors, logs and journal entries (serve uses
	// "name/version").
	Name string
	// Path is the model file; a compile re-reads it through onnx.LoadVerified, which
	// refuses bytes other than Digest's (onnx.ErrChanged).
	Path string
	// Digest is the content digest of the file and its external data at Open: the
	// model part of every journal key. Empty for an in-memory model.
	Digest string
	// Stamp is the files' size/mtime/inode at Open (Stamp.Changed reports a change).
	Stamp onnx.Stamp
	// Interface and Signature are the model's inputs and outputs: the signature is a
	// module with the inputs as parameters and no nodes (shape checks, dims). An input
	// with a default (NamedType.Default, Signature.Defaults) is an input of every
	// executable like any other: a caller passes the default when it is not given.
	Interface *onnx.Interface
	Signature *graph.Module
	// Module is an in-memory model (Path empty): compiled as it is, through the journal
	// only when Digest names its content (tests).
	Module *graph.Module
}

// Open reads a model file once: its interface, signature, digest and stamp come from
// the same bytes.
func Open(name, path string) (*Model, error) {
	sc, err := onnx.Scan(path)
	if err != nil {
		return nil, err
	}
	return &Model{Name: name, Path: path, Digest: sc.Digest, Stamp: sc.Stamp, Interface: sc.Interface, Signature: sc.Signature}, nil
}

// InMemory wraps a module that has no file (the conformance suites, tests): without a
// Digest the engine compiles it directly, never through the journal.
func InMemory(name string, m *graph.Module) *Model {
	return &Model{Name: name, Signature: m, Module: m}
}

// load returns the module to compile: the verified file content, or the in-memory one.
func (m *Model) load() (*graph.Module, error) {
	if m.Module != nil {
		return m.Module, nil
	}
	if m.Path == "" {
		panic(fmt.Sprintf("BUG: model %q has neither a file nor a module", m.Name))
	}
	return onnx.LoadVerified(m.Path, m.Digest, onnx.Options{})
}

// cacheable reports whether the model's executables go through the journal.
func (m *Model) cacheable() bool { return m.Digest != "" }
