package serve

import (
	"errors"

	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// The repository's layout, names and files are modelrepo's (one scanner for the server
// and kiln prebuild); this file turns what it finds into the service's view of a model
// folder.

// version is one servable version of a model in the repository.
type version struct {
	number int64
	path   string // the model file
}

// modelDir is a model folder: <repo>/<name>/ with numeric version folders holding
// model.onnx, and an optional config.pbtxt.
type modelDir struct {
	name     string
	dir      string               // symlinks resolved
	config   string               // path of config.pbtxt ("" if absent)
	override *modelpb.ModelConfig // the configuration given to the load API, used instead of config.pbtxt
	versions []version
}

func modelDirOf(m modelrepo.Model) modelDir {
	d := modelDir{name: m.Name, dir: m.Dir, config: m.Config}
	for _, v := range m.Versions {
		d.versions = append(d.versions, version{number: v.Number, path: v.Path})
	}
	return d
}

// scanRepository lists the models of the repository (modelrepo.Root.Scan), with the
// problems found in its folders.
func scanRepository(r repoRoot) ([]modelDir, []string, error) {
	ms, warnings, err := r.Scan()
	if err != nil {
		return nil, nil, err
	}
	out := make([]modelDir, len(ms))
	for i, m := range ms {
		out[i] = modelDirOf(m)
	}
	return out, warnings, nil
}

// scanModel reads one model folder (modelrepo.Root.ScanModelFile: the versions'
// model file is file, or the config's default_model_filename when file is ""); a name
// that is not a model folder of the repository is errBadName.
func scanModel(r repoRoot, name, file string) (modelDir, error) {
	m, err := r.ScanModelFile(name, file)
	if errors.Is(err, modelrepo.ErrUnknownModel) {
		return modelDir{}, errBadName
	}
	if err != nil {
		return modelDir{}, err
	}
	return modelDirOf(m), nil
}
