//go:build !serveonly

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/serve/modelrepo"
)

// repoModel is one model version found in a repository.
type repoModel struct {
	name, version, path string
}

// repositoryModels lists every version of every model of a repository as kiln serve
// finds them (modelrepo.Root.Scan: valid model names, canonical version folders, the
// model file, model.onnx or the config's default_model_filename, a regular file), by
// name, then oldest version first; the warnings name the folders passed over and why.
func repositoryModels(dir string) ([]repoModel, []string, error) {
	root, err := modelrepo.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	ms, warnings, err := root.Scan()
	if err != nil {
		return nil, nil, err
	}
	var out []repoModel
	for _, m := range ms {
		for i := len(m.Versions) - 1; i >= 0; i-- {
			v := m.Versions[i]
			out = append(out, repoModel{m.Name, strconv.FormatInt(v.Number, 10), v.Path})
		}
	}
	return out, warnings, nil
}

// dimsFor reads --dims specs "[MODEL:]sym=N,sym=N" into the bindings for one model.
func dimsFor(specs []string, model string) (map[string]int64, error) {
	env := map[string]int64{}
	for _, spec := range specs {
		scope, kvs, ok := strings.Cut(spec, ":")
		if !ok {
			scope, kvs = "", spec
		}
		if scope != "" && scope != model {
			continue
		}
		if !addDims(env, kvs) {
			return nil, usageError{fmt.Errorf("--dims %q: want [MODEL:]NAME=N,NAME=N", spec)}
		}
	}
	return env, nil
}

func prebuildCmd() *cobra.Command {
	var (
		repo    string
		dims    []string
		threads int
		quiet   bool
		cf      cacheFlags
		tf      targetFlags
	)
	cmd := &cobra.Command{
		Use:   "prebuild --model-repository DIR",
		Short: "Compile every model of a repository into the journal (the Kubernetes warm-cache job); exit 1 if any fails",
		Long: `Compile every <repo>/<model>/<version>/model.onnx for this machine into the binary
journal, so that servers and replicas sharing the journal start warm: what a server asks
for first. The repository is read as kiln serve reads it: the same models and versions,
and the same folders passed over (with a warning). A model with static inputs gets the
executable for its shapes; a model with symbolic input dims gets the generic executable
(one for every shape, what 'kiln serve' runs with specialize_after > 0, the default), and
with --dims seq=128 (every model) or --dims bert:seq=128 (one) the executable for those
shapes too. Executables already in the journal are not rebuilt.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return usageError{fmt.Errorf("--model-repository is required")}
			}
			if tf.target == "host" { // the name kiln prebuild took first
				tf.target = "cpu"
			}
			models, warnings, err := repositoryModels(repo)
			if err != nil {
				return err
			}
			log := newLogger(true)
			for _, w := range warnings {
				log.Warn("model repository", zap.String("problem", w))
			}
			if len(models) == 0 {
				return fmt.Errorf("%s: no <model>/<version>/model.onnx found", repo)
			}
			j, err := cf.open(log)
			if err != nil {
				return err
			}
			defer j.Close()
			passes, err := tf.cudaPasses()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			failed := 0
			start := time.Now()
			for _, p := range passes {
				n, err := prebuildOn(w, p, threads, j, models, dims, quiet, len(passes) > 1)
				if err != nil {
					return err
				}
				failed += n
			}
			st := j.Stats()
			total := len(models) * len(passes)
			fmt.Fprintf(w, "prebuilt %d of %d models in %v into %s (journal, executables and kernels: %d hits, %d builds)\n",
				total-failed, total, time.Since(start).Round(time.Millisecond), j.Dir(), st.Hits, st.Builds)
			if failed > 0 {
				return fmt.Errorf("%d of %d models failed", failed, total)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "model-repository", "", "the model repository (Triton layout)")
	f.StringArrayVar(&dims, "dims", nil, "bind symbolic input dims: NAME=N,... for every model or MODEL:NAME=N,... for one (repeatable)")
	f.IntVar(&threads, "threads", 0, "threads of the CPU device (0: every core)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no compile progress display")
	cf.register(f, "on")
	tf.register(cmd)
	tf.registerCUDAArch(cmd, true)
	return cmd
}

// prebuildOn prebuilds every model for the target and devices tf opens, printing a line
// per model; it returns how many failed. With several passes each line names the
// target's architecture.
func prebuildOn(w io.Writer, tf targetFlags, threads int, j *compilecache.Journal, models []repoModel, dims []string, quiet, named bool) (int, error) {
	ds, err := tf.open(threads, true)
	if err != nil {
		return 0, err
	}
	defer ds.Close()
	buildInCache(ds.cpu, j)
	e, err := newEngine(ds, j, compileOptions{level: defaultLevel})
	if err != nil {
		return 0, err
	}
	failed := 0
	for i, m := range models {
		label := m.name
		if m.version != "" {
			label += "/" + m.version
		}
		if named {
			label += " (" + ds.target.Arch + ")"
		}
		fmt.Fprintf(w, "[%d/%d] %s: ", i+1, len(models), label)
		built, err := prebuildOne(e, m, label, dims, quiet)
		var parts []string
		for _, c := range built {
			parts = append(parts, fmt.Sprintf("%s in %v (key %s)", c.Outcome, c.Took.Round(time.Millisecond), c.Key.Short()))
		}
		if err != nil {
			failed++
			parts = append(parts, "FAILED: "+err.Error())
		}
		fmt.Fprintln(w, strings.Join(parts, "; "))
	}
	return failed, nil
}

// prebuildOne builds into the journal what a server asks for first: for a model with
// free input dims the generic executable (every shape, what `kiln serve` runs with
// specialize-after > 0, the default) and, when --dims binds them, the executable for
// those shapes too; for a model with static inputs the executable for its shapes.
func prebuildOne(e *engine.Engine, m repoModel, label string, specs []string, quiet bool) ([]*engine.Built, error) {
	env, err := dimsFor(specs, m.name)
	if err != nil {
		return nil, err
	}
	model, err := e.Open(label, m.path)
	if err != nil {
		return nil, err
	}
	var want []map[string][]int64 // nil: the generic executable
	if hasFreeDims(model.Signature) {
		want = append(want, nil)
		if len(env) > 0 {
			shapes, err := engine.InputShapes(model.Signature, env)
			if err != nil {
				return nil, err
			}
			want = append(want, shapes)
		}
	} else {
		shapes, err := engine.InputShapes(model.Signature, nil)
		if err != nil {
			return nil, err
		}
		want = append(want, shapes)
	}
	var out []*engine.Built
	for _, shapes := range want {
		c, err := buildWith(e, model, shapes, compileOptions{quiet: quiet, level: defaultLevel})
		if err != nil {
			what := "generic executable"
			if shapes != nil {
				what = fmt.Sprint("shapes ", shapes)
			}
			return out, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// hasFreeDims reports whether some input of the signature has an extent left free.
func hasFreeDims(sig *graph.Module) bool {
	for _, p := range sig.Main.Params {
		for _, d := range p.Type.Shape {
			if !d.IsConst() {
				return true
			}
		}
	}
	return false
}
