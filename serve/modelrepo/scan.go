package modelrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A Version is one servable version of a model: a canonical decimal folder holding a
// regular file named by the model's default_model_filename (model.onnx by default).
type Version struct {
	Number int64
	Path   string // the model file
}

// A Model is a model folder of the repository: <repo>/<name>/ with numeric version
// folders holding model.onnx, and an optional config.pbtxt.
type Model struct {
	Name     string
	Dir      string    // symlinks resolved
	Config   string    // path of config.pbtxt ("" if absent)
	Versions []Version // newest first; never empty
}

// Scan lists the models of a Triton-style repository, sorted by name. Hidden entries
// (a leading dot) and entries that are not directories inside the repository (plain
// files, symlinks leading out of it) are passed over; a folder whose name is not a
// valid model name, or that holds no usable <version>/model.onnx, is reported in the
// warnings (not silently skipped) so that a typo is visible. The error is for a
// repository that cannot be read.
func (r Root) Scan() ([]Model, []string, error) {
	entries, err := os.ReadDir(r.real)
	if err != nil {
		return nil, nil, fmt.Errorf("model repository: %w", err)
	}
	var out []Model
	var warnings []string
	for _, e := range entries {
		name := e.Name()
		if len(name) > 0 && name[0] == '.' {
			continue
		}
		if !ValidModelName(name) {
			warnings = append(warnings, fmt.Sprintf("folder %q skipped: not a valid model name", name))
			continue
		}
		m, err := r.ScanModel(name)
		if errors.Is(err, ErrUnknownModel) {
			continue // not a directory inside the repository
		}
		if err != nil {
			warnings = append(warnings, err.Error())
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, warnings, nil
}

// ScanModel reads one model folder: its versions (canonical decimal folder names,
// each holding a regular file named by the config's default_model_filename, else
// model.onnx; symlinks followed) and its config.pbtxt (a regular file when present). A
// name that is not a model folder of the repository is ErrUnknownModel; a folder
// without a usable version is an error naming the model. A config.pbtxt that does not
// parse, or whose default_model_filename is not a plain file name, is scanned for
// model.onnx: the server reports the config's error when it loads the model.
func (r Root) ScanModel(name string) (Model, error) {
	return r.ScanModelFile(name, "")
}

// ScanModelFile is ScanModel with the versions' model file named by file instead of
// the config (ScanModel when file is ""): the server's load API passes the
// default_model_filename of the configuration it is given.
func (r Root) ScanModelFile(name, file string) (Model, error) {
	dir, err := r.modelPath(name)
	if err != nil {
		return Model{}, err
	}
	m := Model{Name: name, Dir: dir}
	p := filepath.Join(dir, "config.pbtxt")
	switch err := regularFile(p); {
	case err == nil:
		m.Config = p
	case !isMissing(err):
		return m, fmt.Errorf("model %q: config.pbtxt: %v", name, err)
	}
	if file == "" && m.Config != "" {
		if c, _, err := ReadModelConfig(m.Config); err == nil {
			file = c.GetDefaultModelFilename()
		}
	}
	if !plainFileName(file) {
		file = DefaultModelFilename
	}
	subs, err := os.ReadDir(dir)
	if err != nil {
		return m, fmt.Errorf("model %q: %v", name, err)
	}
	var refused []string
	for _, s := range subs {
		n, ok := ParseVersion(s.Name())
		if !ok {
			continue
		}
		p := filepath.Join(dir, s.Name(), file)
		if err := regularFile(p); err != nil {
			if !isMissing(err) {
				refused = append(refused, fmt.Sprintf("%s/%s: %v", s.Name(), file, err))
			}
			continue
		}
		m.Versions = append(m.Versions, Version{Number: n, Path: p})
	}
	if len(m.Versions) == 0 {
		if len(refused) > 0 {
			return m, fmt.Errorf("model %q: no usable <version>/%s: %v", name, file, refused)
		}
		return m, fmt.Errorf("model %q: no <version>/%s in its folder", name, file)
	}
	sort.Slice(m.Versions, func(a, b int) bool { return m.Versions[a].Number > m.Versions[b].Number })
	return m, nil
}

// plainFileName reports whether name names a file inside a directory, with no
// directory part (ValidateModelConfig's rule for the config's file names).
func plainFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}
