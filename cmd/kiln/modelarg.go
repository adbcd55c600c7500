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
// numeric version folder), a version folder (`<model>/<version>/`) or any folder holding
// the model file (model.onnx, or the default_model_filename of a config.pbtxt in the
// folder or the one above it). name is what to call the model (the model folder's name
// for a directory).
func modelArg(arg string) (path, name string, err error) {
	st, err := os.Stat(arg)
	if err != nil || !st.IsDir() {
		return arg, filepath.Base(arg), nil // a file, or an error its reader reports
	}
	dir := filepath.Clean(arg)
	file := func(configDir string) string {
		c, _, err := modelrepo.ReadModelConfig(filepath.Join(configDir, "config.pbtxt"))
		if err == nil && c.GetDefaultModelFilename() != "" {
			return c.GetDefaultModelFilename()
		}
		return modelrepo.DefaultModelFilename
	}
	// a version folder, or any folder with the model file in it
	if _, ok := modelrepo.ParseVersion(filepath.Base(dir)); ok {
		p := filepath.Join(dir, file(filepath.Dir(dir)))
		if regular(p) {
			return p, filepath.Base(filepath.Dir(dir)), nil
		}
	}
	if p := filepath.Join(dir, file(dir)); regular(p) {
		return p, filepath.Base(dir), nil
	}
	// a model folder: its highest version holding the model file
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	best, bestV := "", int64(-1)
	for _, e := range entries {
		v, ok := modelrepo.ParseVersion(e.Name())
		if !ok || v <= bestV {
			continue
		}
		if p := filepath.Join(dir, e.Name(), file(dir)); regular(p) {
			best, bestV = p, v
		}
	}
	if best == "" {
		return "", "", fmt.Errorf("%s: %w: want a model file, a model folder (<model>/<version>/%s) or a version folder",
			arg, errNoModelInDir, file(dir))
	}
	return best, filepath.Base(dir), nil
}

func regular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
