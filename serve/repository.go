package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// version is one servable version of a model in the repository.
type version struct {
	number int64
	path   string // the model file
}

// modelDir is a model folder: <repo>/<name>/ with numeric version folders holding
// model.onnx, and an optional config.pbtxt.
type modelDir struct {
	name     string
	dir      string // symlinks resolved
	config   string // path of config.pbtxt ("" if absent)
	versions []version
}

// scanRepository lists the models of a Triton-style repository. A folder without any
// <version>/model.onnx, or whose name is not a valid model name, is reported (not
// silently skipped) so a typo is visible.
func scanRepository(r repoRoot) ([]modelDir, []string, error) {
	entries, err := os.ReadDir(r.real)
	if err != nil {
		return nil, nil, fmt.Errorf("model repository: %w", err)
	}
	var out []modelDir
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
		md, err := scanModel(r, name)
		if err == errBadName {
			continue // not a directory inside the repository
		}
		if err != nil {
			warnings = append(warnings, err.Error())
			continue
		}
		out = append(out, md)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out, warnings, nil
}

// scanModel reads one model folder (a name resolved inside the repository): its
// versions (canonical decimal folder names) and config.pbtxt, each a regular file.
func scanModel(r repoRoot, name string) (modelDir, error) {
	dir, err := r.modelPath(name)
	if err != nil {
		return modelDir{}, err
	}
	md := modelDir{name: name, dir: dir}
	p := filepath.Join(dir, "config.pbtxt")
	switch err := regularFile(p); {
	case err == nil:
		md.config = p
	case !isMissing(err):
		return md, fmt.Errorf("model %q: config.pbtxt: %v", name, err)
	}
	subs, err := os.ReadDir(dir)
	if err != nil {
		return md, fmt.Errorf("model %q: %v", name, err)
	}
	var refused []string
	for _, s := range subs {
		n, ok := parseVersion(s.Name())
		if !ok {
			continue
		}
		p := filepath.Join(dir, s.Name(), "model.onnx")
		if err := regularFile(p); err != nil {
			if !isMissing(err) {
				refused = append(refused, fmt.Sprintf("%s/model.onnx: %v", s.Name(), err))
			}
			continue
		}
		md.versions = append(md.versions, version{number: n, path: p})
	}
	if len(md.versions) == 0 {
		if len(refused) > 0 {
			return md, fmt.Errorf("model %q: no usable <version>/model.onnx: %v", name, refused)
		}
		return md, fmt.Errorf("model %q: no <version>/model.onnx in its folder", name)
	}
	sort.Slice(md.versions, func(a, b int) bool { return md.versions[a].number > md.versions[b].number })
	return md, nil
}
