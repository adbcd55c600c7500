package onnx

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDigestCoversExternalData: the digest changes with the external weights (the
// onnxruntime#6455 failure: a cache keyed without them), not with the model's path.
func TestDigestCoversExternalData(t *testing.T) {
	write := func(dir string, weights []byte) string {
		os.MkdirAll(filepath.Join(dir, "weights"), 0o755)
		os.WriteFile(filepath.Join(dir, "weights", "w.bin"), weights, 0o644)
		p := filepath.Join(dir, "model.onnx")
		os.WriteFile(p, externalModel("weights/w.bin"), 0o644)
		return p
	}
	a, err := Digest(write(t.TempDir(), make([]byte, 16)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Digest(write(t.TempDir(), make([]byte, 16)))
	changed := make([]byte, 16)
	changed[9] = 1
	c, _ := Digest(write(t.TempDir(), changed))
	if a != b || a == c {
		t.Fatalf("same content in two folders: %s vs %s; other weights: %s", a, b, c)
	}
	model, err := os.ReadFile(write(t.TempDir(), make([]byte, 16)))
	if err != nil {
		t.Fatal(err)
	}
	locs, err := externalLocations(model)
	if err != nil || len(locs) != 1 || locs[0] != "weights/w.bin" {
		t.Fatalf("locations %v: %v", locs, err)
	}
	if _, err := Digest(write(t.TempDir(), nil)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	os.WriteFile(p, externalModel("../outside.bin"), 0o644)
	if _, err := Digest(p); err == nil {
		t.Fatal("a location outside the model folder was hashed")
	}
}

// TestDigestLargeFileChunks: files over one chunk hash in parallel and any byte counts.
func TestDigestLargeFileChunks(t *testing.T) {
	data := make([]byte, 3*digestChunk+123)
	a := hashBytes(data)
	data[2*digestChunk+5] = 1
	if b := hashBytes(data); a == b {
		t.Fatal("a changed byte in the third chunk kept the digest")
	}
}

// TestLoadSignatureMatchesLoad: the interface read without decoding is the loaded one.
func TestLoadSignatureMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "weights"), 0o755)
	os.WriteFile(filepath.Join(dir, "weights", "w.bin"), make([]byte, 16), 0o644)
	p := filepath.Join(dir, "model.onnx")
	os.WriteFile(p, externalModel("weights/w.bin"), 0o644)
	paths := []string{p}
	if zoo, err := filepath.Glob("../../../shared/zoo/*/model.onnx"); err == nil {
		paths = append(paths, zoo...)
	}
	for _, path := range paths {
		full, err := Load(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		sig, err := LoadSignature(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(sig.Main.Params) != len(full.Main.Params) || len(sig.Main.Nodes) != 0 {
			t.Fatalf("%s: %d params, want %d", path, len(sig.Main.Params), len(full.Main.Params))
		}
		for i, q := range full.Main.Params {
			if s := sig.Main.Params[i]; s.Name != q.Name || s.Type.String() != q.Type.String() {
				t.Fatalf("%s: param %d is %s %v, want %s %v", path, i, s.Name, s.Type, q.Name, q.Type)
			}
		}
	}
	if _, err := LoadSignature(filepath.Join(dir, "weights", "w.bin")); err == nil {
		t.Fatal("a weights file read as a model")
	}
}
