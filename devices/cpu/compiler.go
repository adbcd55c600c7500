package cpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
)

// Compiler is a C compiler found on this machine.
type Compiler struct {
	Path    string
	Version string // first line of `cc --version`
	// Flags are added to every build: optimization and ISA flags, and the two that let
	// the C compiler vectorize selects and square roots (kernels never read errno nor
	// floating-point exception flags; IEEE results are unchanged), and -fopenmp-simd,
	// which honours the `omp simd reduction` pragmas of vectorized reduction loops
	// without linking an OpenMP runtime. Under an ISA cap (target.ISAEnv) the -mno-
	// flags that take away what the cap removes follow -march=native (capFlags).
	Flags []string
	// Native is what -march=native means to this compiler on this machine: the CPU and
	// every ISA extension it enables or disables, as the compiler itself reports them
	// (resolveNative). Identity puts it in place of -march=native. Empty, with no
	// -march=native in Flags, for a compiler that refuses the flag (a cross compiler):
	// it builds for its own default target, which its Version names.
	Native string

	work *workState // where it writes its inputs and outputs; nil: the per-user default
}

// FindCompiler looks for $CC, then gcc, then clang (cc is the fallback name). An
// unknown ISA cap is target.ErrUnknownLevel.
func FindCompiler() (*Compiler, error) {
	level, err := target.EnvLevel()
	if err != nil {
		return nil, err
	}
	var tried []string
	candidates := []string{"gcc", "clang", "cc"}
	if env := os.Getenv("CC"); env != "" {
		candidates = append([]string{env}, candidates...)
	}
	for _, name := range candidates {
		path, err := exec.LookPath(name)
		if err != nil {
			tried = append(tried, name)
			continue
		}
		out, err := exec.Command(path, "--version").Output()
		if err != nil {
			tried = append(tried, name+" (--version failed)")
			continue
		}
		version, _, _ := strings.Cut(string(out), "\n")
		native, ok := resolveNative(path)
		flags := []string{"-O3"}
		if ok {
			// vectorized loops as wide as the micro-kernels' vectors: gcc's tuning for
			// AVX-512 Xeons prefers 256-bit ones (a choice for Skylake's clocks), and
			// every kernel already runs 512-bit micro-kernels; on an AVX-512 Xeon
			// (2026-11-28) bert_tiny 0.955, mobilenet_v2 0.963, EfficientNet-B0 0.971
			// of the time at one thread. No effect on a machine without AVX-512.
			flags = append(flags, "-march=native", "-mprefer-vector-width=512")
		}
		flags = append(append(flags, capFlags(level)...), "-fno-trapping-math", "-fno-math-errno", "-fopenmp-simd")
		return &Compiler{Path: path, Version: strings.TrimSpace(version), Flags: flags, Native: native, work: &workState{}}, nil
	}
	return nil, devices.Unavailablef("no C compiler found (tried %s); install one, e.g. `apt-get install gcc`, or set $CC", strings.Join(tried, ", "))
}

// Identity names what the compiler produces, for cache keys: its version and flags (an
// ISA cap's -mno- flags included), with
// -march=native replaced by what it resolves to (Native), so that two machines share
// object code only when the compiler targets exactly the same instruction set on both.
// The resolution appears as its CPU name and a digest of all its options (it is stored
// in every key's material, and runs to a hundred options).
func (c *Compiler) Identity() string {
	flags := make([]string, len(c.Flags))
	for i, f := range c.Flags {
		flags[i] = f
		if f == "-march=native" {
			flags[i] = "-march=native(" + nativeSummary(c.Native) + ")"
		}
	}
	return c.Version + " " + strings.Join(flags, " ")
}

// Build compiles C source into a shared object and returns its bytes.
func (c *Compiler) Build(ctx context.Context, src string) ([]byte, error) {
	return c.run(ctx, map[string][]byte{"kernels.c": []byte(src)}, "kernels.so",
		"-shared", "-fPIC", "-pthread", "-o", "kernels.so", "kernels.c", "-lm")
}

// CompileObject compiles one C translation unit into a position-independent object file
// (one per kernel, so that each can be cached and built in parallel; Link joins them).
func (c *Compiler) CompileObject(ctx context.Context, src string) ([]byte, error) {
	return c.run(ctx, map[string][]byte{"unit.c": []byte(src)}, "unit.o", "-c", "-fPIC", "-o", "unit.o", "unit.c")
}

// Link joins object files into one shared object.
func (c *Compiler) Link(ctx context.Context, objects [][]byte) ([]byte, error) {
	files := map[string][]byte{}
	args := []string{"-shared", "-fPIC", "-pthread", "-o", "kernels.so"}
	for i, o := range objects {
		name := fmt.Sprintf("o%d.o", i)
		files[name] = o
		args = append(args, name)
	}
	return c.run(ctx, files, "kernels.so", append(args, "-lm")...)
}

// run writes files into a fresh directory, runs the compiler there with the flags and
// args, and returns the output file; a failure carries the compiler's message.
func (c *Compiler) run(ctx context.Context, files map[string][]byte, output string, args ...string) ([]byte, error) {
	dir, err := os.MkdirTemp(c.workState().parent(), "kiln-cc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, c.Path, append(append([]string{}, c.Flags...), args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + "\n..."
		}
		return nil, fmt.Errorf("%w: %s: %v\n%s", devices.ErrBuild, filepath.Base(c.Path), err, msg)
	}
	return os.ReadFile(filepath.Join(dir, output))
}
