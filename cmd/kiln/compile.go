//go:build !serveonly

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// shapeFlags are the ways to give the concrete input shapes a compile binds its
// symbolic dims from.
type shapeFlags struct {
	inputs   []string // NAME=FILE
	inputDir string   // an ONNX test data set
	dims     string   // sym=N,sym=N
}

func (s *shapeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&s.inputs, "input", nil, "NAME=FILE, a .npy or TensorProto .pb input (repeatable)")
	f.StringVar(&s.inputDir, "input-dir", "", "a folder of input_K.pb files in graph-input order (an ONNX test_data_set_N)")
	f.StringVar(&s.dims, "dims", "", "bind symbolic dims without input files, e.g. batch=1,seq=128")
}

// tensors returns the inputs given by --input/--input-dir, keyed by name, and the
// defaults of the inputs with one that were not given.
func (s *shapeFlags) tensors(m *graph.Module) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	if s.inputDir != "" {
		var names []string
		var types []graph.Type
		for _, p := range m.Main.Params {
			names, types = append(names, p.Name), append(types, p.Type)
		}
		got, err := readInputDir(s.inputDir, names, types)
		if err != nil {
			return nil, err
		}
		out = got
	}
	if len(s.inputs) > 0 {
		vals, err := readInputs(m, s.inputs, false)
		if err != nil {
			return nil, err
		}
		for k, v := range vals {
			t, ok := v.(*tensor.Tensor)
			if !ok {
				return nil, fmt.Errorf("input %q is not a tensor", k)
			}
			out[k] = t
		}
	}
	for name, d := range m.Defaults {
		if _, ok := out[name]; !ok {
			out[name] = d
		}
	}
	return out, nil
}

// shapes returns inputs whose shapes carry the bindings: the given inputs, and for the
// others stand-ins of the declared shape with --dims substituted.
func (s *shapeFlags) shapes(m *graph.Module) (map[string]*tensor.Tensor, error) {
	given, err := s.tensors(m)
	if err != nil {
		return nil, err
	}
	env := map[string]int64{}
	if s.dims != "" && !addDims(env, s.dims) {
		return nil, usageError{fmt.Errorf("--dims %q: want NAME=N,NAME=N", s.dims)}
	}
	for _, p := range m.Main.Params {
		if _, ok := given[p.Name]; ok || p.Const != nil {
			continue
		}
		shape := make(tensor.Shape, len(p.Type.Shape))
		for i, d := range p.Type.Shape {
			v, ok := d.Eval(env)
			if !ok {
				return nil, usageError{fmt.Errorf("input %q has shape %v: give the input (--input, --input-dir) or bind its dims (--dims %s=N)", p.Name, p.Type, strings.Join(d.Symbols(), "=N,"))}
			}
			shape[i] = int(v)
		}
		given[p.Name] = standIn(p.Type.DType, shape)
	}
	return given, nil
}

// addDims adds "sym=N,sym=N" bindings to env; false if the list is malformed.
func addDims(env map[string]int64, list string) bool {
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return false
		}
		env[strings.TrimSpace(k)] = n
	}
	return true
}

func compileCmd() *cobra.Command {
	var (
		out, dump   string
		quiet       bool
		noFusion    bool
		boundsCheck bool
		level       int
		layout      string
		threads     int
		shapeInputs shapeFlags
		tf          targetFlags
	)
	cmd := &cobra.Command{
		Use:   "compile MODEL -o FILE.kiln",
		Short: "Compile an ONNX model into a kiln executable (kernels, VM code, memory plan)",
		Long: `Compile an ONNX model for this CPU (or --target opencl: kernels on an OpenCL
device where the GPU strategies build them, the rest on this CPU). Symbolic dims (batch, seq) are bound from the
input shapes given by --input, --input-dir or --dims: the executable then serves those
shapes. Without any of them the dims stay symbolic and the executable serves every
shape (generic kernels; models whose kernels cannot take run-time extents yet, or with
dims that depend on data, are refused with the reason). The executable carries its
kernels as a shared object (and an OpenCL program binary), so it runs where no C
compiler is installed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, name, err := modelArg(args[0])
			if err != nil {
				return err
			}
			args = []string{model}
			if err := checkLevel(level); err != nil {
				return err
			}
			if out == "" {
				out = strings.TrimSuffix(name, filepath.Ext(name)) + ".kiln"
			}
			m, err := onnx.Load(args[0], onnx.Options{})
			if err != nil {
				return err
			}
			// with no input, data set or --dims, symbolic dims stay symbolic: one
			// executable for every shape
			var shapes map[string]*tensor.Tensor
			if len(shapeInputs.inputs) > 0 || shapeInputs.inputDir != "" || shapeInputs.dims != "" {
				if shapes, err = shapeInputs.shapes(m); err != nil {
					return err
				}
			}
			ds, err := tf.open(threads, true)
			if err != nil {
				return err
			}
			defer ds.Close()
			if layout != "blocked" && layout != "plain" {
				return usageError{fmt.Errorf("--layout %q: want blocked or plain", layout)}
			}
			res, took, err := compileModel(m, shapes, ds, compileOptions{quiet: quiet, plain: layout == "plain", noFusion: noFusion, level: level, dumpPass: dump, dump: cmd.OutOrStdout(), boundsCheck: boundsCheck})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			blob, err := res.Exe.MarshalBinary()
			if err != nil {
				return err
			}
			if err := writeFileAtomic(out, blob); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			printStats(w, name, res.Stats, took)
			fmt.Fprintf(w, "wrote %s (%s)\n", out, byteSize(int64(len(blob))))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "the executable to write (default: MODEL's name with .kiln)")
	f.StringVar(&dump, "dump", "", "print the graph before and after this pass (one of -O's passes)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress display")
	f.IntVarP(&level, "opt", "O", defaultLevel, levelHelp())
	f.BoolVar(&noFusion, "no-fusion", false, "lower every node to a kernel of its own (the pipeline without fuse-ops)")
	f.StringVar(&layout, "layout", "blocked", "blocked: convolutions exchange channel-blocked tensors (alter-layout); plain: every tensor NCHW")
	f.IntVar(&threads, "threads", 0, "threads of the CPU device (0: every core)")
	f.BoolVar(&boundsCheck, "bounds-check", false, boundsCheckHelp)
	shapeInputs.register(cmd)
	tf.register(cmd)
	tf.registerCUDAArch(cmd, false)
	return cmd
}

// writeFileAtomic writes through a temporary file in the same folder and a rename, so a
// reader never sees half an executable.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kiln-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// CreateTemp's file is the owner's alone; an executable is read by whoever runs it
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
