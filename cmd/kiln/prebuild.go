package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/target"
)

// repoModel is one model version found in a repository.
type repoModel struct {
	name, version, path string
}

// repositoryModels lists every version of every model of a repository as kiln serve
// finds them (modelrepo.Root.Scan: valid model names, canonical version folders,
// model.onnx a regular file), by name, then oldest version first; the warnings name
// the folders passed over and why.
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
		repo, tgt string
		dims      []string
		threads   int
		quiet     bool
		cf        cacheFlags
	)
	cmd := &cobra.Command{
		Use:   "prebuild --model-repository DIR",
		Short: "Compile every model of a repository into the journal (the Kubernetes warm-cache job); exit 1 if any fails",
		Long: `Compile every <repo>/<model>/<version>/model.onnx for this machine into the binary
journal, so that servers and replicas sharing the journal start warm. The repository is
read as kiln serve reads it: the same models and versions, and the same folders passed
over (with a warning). Models with symbolic input dims need them bound: --dims seq=128 for every
model, --dims bert:seq=128 for one. Models already in the journal are not rebuilt.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return usageError{fmt.Errorf("--model-repository is required")}
			}
			if tgt != "host" && tgt != "cpu" {
				return usageError{fmt.Errorf("--target %q: only the host CPU is a target (CUDA and OpenCL devices are not built)", tgt)}
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
			dev, err := openCPU(threads, true)
			if err != nil {
				return err
			}
			defer dev.Close()
			buildInCache(dev, j)
			w := cmd.OutOrStdout()
			failed := 0
			start := time.Now()
			for i, m := range models {
				label := m.name
				if m.version != "" {
					label += "/" + m.version
				}
				fmt.Fprintf(w, "[%d/%d] %s: ", i+1, len(models), label)
				c, err := prebuildOne(j, m, dims, dev, quiet)
				if err != nil {
					failed++
					fmt.Fprintf(w, "FAILED: %v\n", err)
					continue
				}
				fmt.Fprintf(w, "%s in %v (key %s)\n", c.Outcome, c.Took.Round(time.Millisecond), c.Key.Short())
			}
			st := j.Stats()
			fmt.Fprintf(w, "prebuilt %d of %d models in %v into %s (journal, executables and kernels: %d hits, %d builds)\n",
				len(models)-failed, len(models), time.Since(start).Round(time.Millisecond), j.Dir(), st.Hits, st.Builds)
			if failed > 0 {
				return fmt.Errorf("%d of %d models failed", failed, len(models))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "model-repository", "", "the model repository (Triton layout)")
	f.StringVar(&tgt, "target", "host", "what to compile for (host: this machine's CPU)")
	f.StringArrayVar(&dims, "dims", nil, "bind symbolic input dims: NAME=N,... for every model or MODEL:NAME=N,... for one (repeatable)")
	f.IntVar(&threads, "threads", 0, "threads of the CPU device (0: every core)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no compile progress display")
	cf.register(f, "on")
	return cmd
}

// prebuildOne compiles one model version into the journal for the shapes its
// signature and the --dims bindings give.
func prebuildOne(j *compilecache.Journal, m repoModel, specs []string, dev *devcpu.Device, quiet bool) (*compiler.Cached, error) {
	env, err := dimsFor(specs, m.name)
	if err != nil {
		return nil, err
	}
	sig, err := onnx.LoadSignature(m.path)
	if err != nil {
		return nil, err
	}
	shapes, err := compiler.InputShapes(sig, env)
	if err != nil {
		return nil, fmt.Errorf("%w (one executable for every shape comes with dynamic-shape support)", err)
	}
	src, err := modelSource(m.path)
	if err != nil {
		return nil, err
	}
	opts := compiler.Options{CPU: dev, Passes: passes.Level(defaultLevel), Inputs: shapes}
	var bar *progressBar
	if !quiet {
		bar = newProgressBar(os.Stderr)
		opts.Progress = bar.update
	}
	c, err := compiler.BuildCached(j, src, target.Host(), opts)
	if bar != nil {
		bar.finish()
	}
	return c, err
}
