//go:build !serveonly

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// maxKilnBytes bounds a .kiln file read from disk.
const maxKilnBytes = 8 << 30

// isKilnFile reports a compiled executable (by its magic), as opposed to an ONNX model.
func isKilnFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return strings.HasSuffix(path, ".kiln")
	}
	defer f.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte("KILNEXE"))
}

func readKilnFile(path string) (*vm.Executable, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxKilnBytes {
		return nil, fmt.Errorf("%s: %d bytes is larger than any executable kiln writes", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var exe vm.Executable
	if err := exe.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &exe, nil
}

// progressBar shows compile progress: a bar for stages with parts (kernels lowered,
// kernels built), a line for the others; plain lines when stderr is not a terminal.
type progressBar struct {
	w     io.Writer
	tty   bool
	stage string
	bar   *progressbar.ProgressBar
	last  time.Time
}

func newProgressBar(f *os.File) *progressBar {
	return &progressBar{w: f, tty: term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) update(pr engine.Progress) {
	if pr.Stage != p.stage {
		p.finish()
		p.stage = pr.Stage
		if !p.tty {
			fmt.Fprintf(p.w, "compile: %s\n", pr.Stage)
		}
	}
	if pr.Total == 0 || !p.tty {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(pr.Total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(pr.Stage),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(50*time.Millisecond))
	}
	p.bar.ChangeMax(pr.Total)
	p.bar.Describe(fmt.Sprintf("%-6s %s", pr.Stage, shorten(pr.Detail, 32)))
	_ = p.bar.Set(pr.Done)
}

func (p *progressBar) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// readInputDir reads input_K.pb files of an ONNX test data set, in the order of names.
func readInputDir(dir string, names []string, types []graph.Type) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for k, name := range names {
		p := filepath.Join(dir, fmt.Sprintf("input_%d.pb", k))
		if _, err := os.Stat(p); err != nil {
			if k == 0 {
				return nil, fmt.Errorf("--input-dir %s: no input_0.pb", dir)
			}
			break
		}
		d, err := onnx.ReadData(p, types[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if d.Tensor == nil {
			return nil, fmt.Errorf("%s: input %q is not a tensor", p, name)
		}
		out[name] = d.Tensor
	}
	return out, nil
}

// exeInputs reads the inputs of a compiled executable from --input / --input-dir, by the
// names in its signature.
func exeInputs(exe *vm.Executable, s shapeFlags) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	if s.inputDir != "" {
		var names []string
		var types []graph.Type
		for _, in := range exe.Inputs {
			names = append(names, in.Name)
			types = append(types, graph.TensorType(in.DType))
		}
		got, err := readInputDir(s.inputDir, names, types)
		if err != nil {
			return nil, err
		}
		out = got
	}
	for _, spec := range s.inputs {
		name, file, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, usageError{fmt.Errorf("--input %q: want NAME=FILE", spec)}
		}
		t, err := readTensorFile(file)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// orderInputs puts named inputs in the executable's parameter order.
func orderInputs(exe *vm.Executable, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	var args []*tensor.Tensor
	var missing []string
	for _, in := range exe.Inputs {
		t, ok := inputs[in.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", in.Name, in.TypeString()))
		}
		args = append(args, t)
	}
	if len(missing) > 0 {
		return nil, usageError{fmt.Errorf("missing inputs: %s", strings.Join(missing, ", "))}
	}
	for name := range inputs {
		found := false
		for _, in := range exe.Inputs {
			found = found || in.Name == name
		}
		if !found {
			return nil, usageError{fmt.Errorf("the executable has no input %q", name)}
		}
	}
	return args, nil
}

// runExecutable loads exe on ds and runs it once.
func runExecutable(exe *vm.Executable, ds *deviceSet, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	args, err := orderInputs(exe, inputs)
	if err != nil {
		return nil, err
	}
	machine, err := loadOn(ds, exe)
	if err != nil {
		return nil, err
	}
	defer machine.Close()
	return machine.Run(context.Background(), args)
}

// loadOn loads an executable (compiled now, from the journal or a .kiln file) on ds.
func loadOn(ds *deviceSet, exe *vm.Executable) (*vm.VM, error) {
	e, err := engine.New(ds.config())
	if err != nil {
		return nil, err
	}
	return e.LoadExecutable(exe)
}
