//go:build !serveonly

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kilnrt/kiln/serve/modelrepo"
)

// errNoModelInDir: a directory given as the model holds no model file.
var errNoModelInDir = errors.New("no model in the directory")

// modelArg resolves the model argument of compile, run, bench and inspect: a file is
// itself; a directory is a model folder of a Triton repository (`<model>/`: its highest
// version, as the server scans it: modelrepo.Root.ScanModel), a version folder
// (`<model>/<version>/`) or any folder holding model.onnx. name is what to call the
// model (the model folder's name for a directory).
func modelArg(arg string) (path, name string, err error) {
	st, err := os.Stat(arg)
	if err != nil || !st.IsDir() {
		return arg, filepath.Base(arg), nil // a file, or an error its reader reports
	}
	dir := filepath.Clean(arg)
	if m, err := scanModel(dir); err == nil {
		return m.Versions[0].Path, filepath.Base(dir), nil
	}
	if v, ok := modelrepo.ParseVersion(filepath.Base(dir)); ok {
		if m, err := scanModel(filepath.Dir(dir)); err == nil {
			for _, ver := range m.Versions {
				if ver.Number == v {
					return ver.Path, filepath.Base(filepath.Dir(dir)), nil
				}
			}
		}
	}
	p := filepath.Join(dir, modelrepo.DefaultModelFilename)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p, filepath.Base(dir), nil
	}
	return "", "", fmt.Errorf("%s: %w: want a model file, a model folder (<model>/<version>/%s) or a version folder",
		arg, errNoModelInDir, modelrepo.DefaultModelFilename)
}

// scanModel scans dir as a model folder of the repository that holds it.
func scanModel(dir string) (modelrepo.Model, error) {
	root, err := modelrepo.Open(filepath.Dir(dir))
	if err != nil {
		return modelrepo.Model{}, err
	}
	return root.ScanModel(filepath.Base(dir))
}
