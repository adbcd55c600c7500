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
		inputSpecs     []string
	)
	cmd := &cobra.Command{
		Use:   "run --engine ref MODEL --input NAME=FILE...",
		Short: "Evaluate a model once on inputs from .npy or TensorProto .pb files",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEngine(engine); err != nil {
				return err
			}
			m, err := onnx.Load(args[0], onnx.Options{})
			if err != nil {
				return err
			}
			inputs, err := readInputs(m, inputSpecs)
			if err != nil {
				return err
			}
			start := time.Now()
			outs, err := ref.Eval(m, inputs, ref.Options{Context: context.Background()})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "evaluated %s with engine %s in %v\n", filepath.Base(args[0]), engine, time.Since(start).Round(time.Millisecond))
			for i, v := range outs {
				name := m.Main.Results[i].Name
				if outDir != "" {
					if err := writeOutput(outDir, name, v); err != nil {
						return err
					}
					continue
				}
				summarize(w, name, v)
			}
			if outDir != "" {
				fmt.Fprintf(w, "wrote %d outputs to %s\n", len(outs), outDir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&engine, "engine", "ref", "engine to run: ref (the reference evaluator)")
	f.StringArrayVar(&inputSpecs, "input", nil, "NAME=FILE, a .npy or TensorProto .pb file (repeatable)")
	f.StringVar(&outDir, "output-dir", "", "write each output as NAME.npy into this folder instead of printing a summary")
	return cmd
}

func readInputs(m *graph.Module, specs []string) (map[string]ref.Value, error) {
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
		if _, ok := inputs[p.Name]; !ok && p.Const == nil {
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
