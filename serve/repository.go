package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	dir      string
	config   string // path of config.pbtxt ("" if absent)
	versions []version
}

// scanRepository lists the models of a Triton-style repository. A folder without any
// <version>/model.onnx is reported (not silently skipped) so a typo is visible.
func scanRepository(repo string) ([]modelDir, []string, error) {
	entries, err := os.ReadDir(repo)
	if err != nil {
		return nil, nil, fmt.Errorf("model repository: %w", err)
	}
	var out []modelDir
	var warnings []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		md, err := scanModel(repo, e.Name())
		if err != nil {
			warnings = append(warnings, err.Error())
			continue
		}
		out = append(out, md)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out, warnings, nil
}

func scanModel(repo, name string) (modelDir, error) {
	md := modelDir{name: name, dir: filepath.Join(repo, name)}
	if _, err := os.Stat(filepath.Join(md.dir, "config.pbtxt")); err == nil {
		md.config = filepath.Join(md.dir, "config.pbtxt")
	}
	subs, err := os.ReadDir(md.dir)
	if err != nil {
		return md, err
	}
	for _, s := range subs {
		n, err := strconv.ParseInt(s.Name(), 10, 64)
		if err != nil || !s.IsDir() || n < 0 {
			continue
		}
		p := filepath.Join(md.dir, s.Name(), "model.onnx")
		if _, err := os.Stat(p); err == nil {
			md.versions = append(md.versions, version{number: n, path: p})
		}
	}
	if len(md.versions) == 0 {
		return md, fmt.Errorf("model %q: no <version>/model.onnx under %s", name, md.dir)
	}
	sort.Slice(md.versions, func(a, b int) bool { return md.versions[a].number > md.versions[b].number })
	return md, nil
}
