//go:build !serveonly

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// maxInputBytes bounds one input file.
const maxInputBytes = 4 << 30

func runCmd() *cobra.Command {
	var (
		engine, outDir string
		threads        int
		shapeInputs    shapeFlags
		quiet          bool
		boundsCheck    bool
		cf             cacheFlags
		tf             targetFlags
	)
	cmd := &cobra.Command{
		Use:   "run MODEL|FILE.kiln --input NAME=FILE...",
		Short: "Run a model or a compiled executable once on inputs from .npy or TensorProto .pb files",
		Long: `Run once and print a summary of each output (or write them with --output-dir).
An ONNX model runs on the compiled engine by default: it is compiled for the shapes of
the given inputs first, through the binary journal (--cache-dir), so a second run loads
the compiled executable instead of compiling (--cache off compiles every time; kiln
compile writes the executable to a file instead); --engine ref evaluates it with the
reference evaluator. A .kiln file runs on the compiled engine.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, name, err := modelArg(args[0])
			if err != nil {
				return err
			}
			args = []string{model}
			if err := checkEngine(engine); err != nil {
				return err
			}
			if boundsCheck && engine != "compiled" {
				return usageError{fmt.Errorf("--bounds-check needs --engine compiled")}
			}
			var (
				names []string
				outs  []ref.Value
				took  time.Duration
			)
			if isKilnFile(args[0]) {
				if engine == "ref" {
					return usageError{fmt.Errorf("%s is a compiled executable; it runs on --engine compiled only", args[0])}
				}
				if boundsCheck {
					return usageError{fmt.Errorf("%s is a compiled executable: --bounds-check applies when kiln compiles a model (kiln compile --bounds-check)", args[0])}
				}
				exe, err := readKilnFile(args[0])
				if err != nil {
					return err
				}
				inputs, err := exeInputs(exe, shapeInputs)
				if err != nil {
					return err
				}
				ds, err := tf.forExecutable(exe).open(threads, false)
				if err != nil {
					return err
				}
				defer ds.Close()
				start := time.Now()
				got, err := runExecutable(exe, ds, inputs)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				took = time.Since(start)
				for i, t := range got {
					names, outs = append(names, exe.Outputs[i].Name), append(outs, t)
				}
			} else if engine == "compiled" && cf.policy != "off" {
				// through the journal: the model is read in full only on a miss
				sig, err := onnx.LoadSignature(args[0])
				if err != nil {
					return err
				}
				inputs, err := shapeInputs.tensors(sig)
				if err != nil {
					return err
				}
				if err := requireInputs(sig, inputs); err != nil {
					return err
				}
				j, err := cf.open(newLogger(quiet))
				if err != nil {
					return err
				}
				defer j.Close()
				ds, err := tf.open(threads, true)
				if err != nil {
					return err
				}
				defer ds.Close()
				start := time.Now()
				c, err := compileCached(j, args[0], inputs, ds, compileOptions{quiet: quiet, level: defaultLevel, boundsCheck: boundsCheck})
				if err != nil {
					return err
				}
				got, err := runExecutable(c.Exe, ds, inputs)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				took = time.Since(start)
				for i, t := range got {
					names, outs = append(names, c.Exe.Outputs[i].Name), append(outs, t)
				}
			} else {
				m, err := onnx.Load(args[0], onnx.Options{})
				if err != nil {
					return err
				}
				inputs, err := readInputs(m, shapeInputs.inputs, shapeInputs.inputDir == "")
				if err != nil {
					return err
				}
				if shapeInputs.inputDir != "" {
					ts, err := shapeInputs.tensors(m)
					if err != nil {
						return err
					}
					for k, v := range ts {
						inputs[k] = v
					}
				}
				for _, r := range m.Main.Results {
					names = append(names, r.Name)
				}
				start := time.Now()
				if engine == "ref" {
					outs, err = ref.Eval(m, inputs, ref.Options{Context: context.Background()})
				} else {
					outs, err = compileAndRun(m, inputs, tf, threads, compileOptions{quiet: quiet, level: defaultLevel, boundsCheck: boundsCheck})
				}
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				took = time.Since(start)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "ran %s with engine %s in %v\n", name, engine, took.Round(time.Millisecond))
			for i, v := range outs {
				if outDir != "" {
					if err := writeOutput(outDir, names[i], v); err != nil {
						return err
					}
					continue
				}
				summarize(w, names[i], v)
			}
			if outDir != "" {
				fmt.Fprintf(w, "wrote %d outputs to %s\n", len(outs), outDir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&engine, "engine", "compiled", "engine to run: compiled (generated kernels on the VM) or ref (the reference evaluator)")
	f.StringVar(&outDir, "output-dir", "", "write each output as NAME.npy into this folder instead of printing a summary")
	f.IntVar(&threads, "threads", 0, "threads for parallel kernels (0: every core)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no compile progress display")
	f.BoolVar(&boundsCheck, "bounds-check", false, boundsCheckHelp)
	f.StringArrayVar(&shapeInputs.inputs, "input", nil, "NAME=FILE, a .npy or TensorProto .pb file (repeatable)")
	f.StringVar(&shapeInputs.inputDir, "input-dir", "", "a folder of input_K.pb files in input order (an ONNX test_data_set_N)")
	cf.register(f, "on")
	tf.register(cmd)
	return cmd
}

// requireInputs reports the model inputs that were not given.
func requireInputs(m *graph.Module, got map[string]*tensor.Tensor) error {
	var missing []string
	for _, p := range m.Main.Params {
		if _, ok := got[p.Name]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%v)", p.Name, p.Type))
		}
	}
	if len(missing) > 0 {
		return usageError{fmt.Errorf("missing inputs: %s (give --input NAME=FILE or --input-dir)", strings.Join(missing, ", "))}
	}
	return nil
}

// readInputs reads --input NAME=FILE specs; with requireAll every input without a default
// must be given.
func readInputs(m *graph.Module, specs []string, requireAll bool) (map[string]ref.Value, error) {
	params := map[string]*graph.Value{}
	for _, p := range m.Main.Params {
		params[p.Name] = p
	}
	inputs := map[string]ref.Value{}
	for _, s := range specs {
		name, file, ok := strings.Cut(s, "=")
		if !ok {
			return nil, usageError{fmt.Errorf("--input %q: want NAME=FILE", s)}
		}
		p, known := params[name]
		if !known {
			return nil, usageError{fmt.Errorf("--input %q: the model has no input %q (inputs: %s)", s, name, paramList(m))}
		}
		t, err := readTensorFile(file)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		if p.Type.Kind != graph.KindTensor {
			return nil, fmt.Errorf("input %q has type %v; only tensor inputs can be given on the command line", name, p.Type)
		}
		inputs[name] = t
	}
	for _, p := range m.Main.Params {
		if _, ok := inputs[p.Name]; ok {
			continue
		}
		if d := m.Defaults[p.Name]; d != nil {
			inputs[p.Name] = d
		} else if requireAll {
			return nil, usageError{fmt.Errorf("missing input %q of type %v (give --input %s=FILE)", p.Name, p.Type, p.Name)}
		}
	}
	return inputs, nil
}

func paramList(m *graph.Module) string {
	var names []string
	for _, p := range m.Main.Params {
		names = append(names, p.Name+": "+p.Type.String())
	}
	return strings.Join(names, ", ")
}

func readTensorFile(path string) (*tensor.Tensor, error) {
	if strings.HasSuffix(path, ".pb") {
		return onnx.ReadTensor(path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxInputBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxInputBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := tensor.ReadNpy(b, maxInputBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func writeOutput(dir, name string, v ref.Value) error {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		return fmt.Errorf("output %q is %s; only tensors can be written as .npy", name, ref.Describe(v))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".npy"))
	if err != nil {
		return err
	}
	if err := tensor.WriteNpy(f, t); err != nil {
		f.Close()
		return fmt.Errorf("output %q: %w", name, err)
	}
	return f.Close()
}

func summarize(w io.Writer, name string, v ref.Value) {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		fmt.Fprintf(w, "%s: %s\n", name, ref.Describe(v))
		return
	}
	fmt.Fprintf(w, "%s: %v%v", name, t.DType, t.Shape)
	if t.DType.IsNumeric() && t.Len() > 0 {
		vals := t.Float64s()
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, x := range vals {
			lo, hi, sum = min(lo, x), max(hi, x), sum+x
		}
		fmt.Fprintf(w, " min %.6g max %.6g mean %.6g", lo, hi, sum/float64(len(vals)))
	}
	fmt.Fprintf(w, " %s\n", t)
}
