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
)

// Compiler is a C compiler found on this machine.
type Compiler struct {
	Path    string
	Version string // first line of `cc --version`
	// Flags are added to every build (optimization and ISA flags).
	Flags []string
}

// FindCompiler looks for $CC, then gcc, then clang (cc is the fallback name).
func FindCompiler() (*Compiler, error) {
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
		return &Compiler{Path: path, Version: strings.TrimSpace(version), Flags: []string{"-O3", "-march=native"}}, nil
	}
	return nil, devices.Unavailablef("no C compiler found (tried %s); install one, e.g. `apt-get install gcc`, or set $CC", strings.Join(tried, ", "))
}

// Build compiles C source into a shared object and returns its bytes.
func (c *Compiler) Build(ctx context.Context, src string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kiln-cc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "kernels.c"), filepath.Join(dir, "kernels.so")
	if err := os.WriteFile(in, []byte(src), 0o600); err != nil {
		return nil, err
	}
	args := append(append([]string{}, c.Flags...), "-shared", "-fPIC", "-pthread", "-o", out, in, "-lm")
	cmd := exec.CommandContext(ctx, c.Path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + "\n..."
		}
		return nil, fmt.Errorf("%w: %s: %v\n%s", devices.ErrBuild, filepath.Base(c.Path), err, msg)
	}
	return os.ReadFile(out)
}
