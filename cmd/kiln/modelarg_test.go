//go:build !serveonly

package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestModelArgTakesFilesAndTritonFolders: compile, run, bench and inspect take a model
// file, a folder holding model.onnx, a Triton model folder (its highest version) or a
// version folder, and the config's default_model_filename; a folder with no model is a
// clear error.
func TestModelArgTakesFilesAndTritonFolders(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain/model.onnx", "x")
	v3 := write("repo/resnet/3/model.onnx", "x")
	v12 := write("repo/resnet/12/model.onnx", "x")
	write("repo/resnet/40/notes.txt", "no model in this version")
	custom := write("repo/named/2/net.onnx", "x")
	write("repo/named/config.pbtxt", `default_model_filename: "net.onnx"`)
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ arg, path, name string }{
		{plain, plain, "model.onnx"},
		{filepath.Join(root, "plain") + "/", plain, "plain"},
		{filepath.Join(root, "repo/resnet"), v12, "resnet"},
		{filepath.Join(root, "repo/resnet/3"), v3, "resnet"},
		{filepath.Join(root, "repo/named"), custom, "named"},
		{filepath.Join(root, "repo/named/2/"), custom, "named"},
	} {
		path, name, err := modelArg(tc.arg)
		if err != nil || path != tc.path || name != tc.name {
			t.Errorf("modelArg(%s) = %s, %s, %v; want %s, %s", tc.arg, path, name, err, tc.path, tc.name)
		}
	}
	if _, _, err := modelArg(filepath.Join(root, "empty")); !errors.Is(err, errNoModelInDir) {
		t.Errorf("an empty folder: %v, want errNoModelInDir", err)
	}
}
