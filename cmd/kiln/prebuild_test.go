//go:build !serveonly

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/servetest"
)

// hostileRepository is testdata.HostileRepository (mlp, and the symlinks evil-link and
// file-link leading to a decoy beside it) with more folders that are not servable as
// they stand: a second model "lenet" whose only usable version is 1 (the others are
// "01" and "+3", which are not canonical, "4" whose model.onnx is a folder and "5"
// whose model.onnx is a FIFO), a folder whose name is not a model name, a model
// without version folders, and a hidden model.
func hostileRepository(t *testing.T) string {
	t.Helper()
	model, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := testdata.HostileRepository(t, model)
	write := func(rel string) {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"lenet/1/model.onnx", "lenet/01/model.onnx", "lenet/+3/model.onnx", "bad\nname/1/model.onnx", "flat/model.onnx", ".hidden/1/model.onnx"} {
		write(rel)
	}
	if err := os.MkdirAll(filepath.Join(repo, "lenet", "4", "model.onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "lenet", "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(repo, "lenet", "5", "model.onnx"), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestPrebuildAndServeSeeTheSameModels: in a hostile repository kiln prebuild compiles
// exactly the model versions kiln serve serves, and names the folders it passes over.
func TestPrebuildAndServeSeeTheSameModels(t *testing.T) {
	repo := hostileRepository(t)
	models, warnings, err := repositoryModels(repo)
	if err != nil {
		t.Fatal(err)
	}
	var prebuilt []string
	for _, m := range models {
		prebuilt = append(prebuilt, m.name+"/"+m.version)
	}

	svc, err := serve.New(serve.Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var served []string
	for _, st := range svc.Index() {
		served = append(served, st.Name+"/"+st.Version)
	}
	slices.Sort(prebuilt)
	slices.Sort(served)
	if want := []string{"lenet/1", "mlp/1"}; !slices.Equal(served, want) {
		t.Fatalf("kiln serve serves %q, want %q", served, want)
	}
	if !slices.Equal(prebuilt, served) {
		t.Errorf("kiln prebuild builds %q, kiln serve serves %q", prebuilt, served)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{`"bad\nname"`, `model "flat"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q do not name %s", warnings, want)
		}
	}
}
