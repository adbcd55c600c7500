//go:build !serveonly

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestOptLevelOutsideTheLevelsIsAUsageError: -O below 0 or above 3 is refused as a
// usage error (exit status 2) by every command that takes it, before any work.
func TestOptLevelOutsideTheLevelsIsAUsageError(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
	}{
		{"compile", compileCmd, []string{"missing.onnx"}},
		{"inspect", inspectCmd, []string{"--plan", "missing.onnx"}},
		{"conformance", conformanceCmd, []string{"--engine", "compiled", "missing-dir"}},
	} {
		for _, level := range []string{"-1", "4", "9"} {
			cmd := c.cmd()
			cmd.SetArgs(append([]string{"-O", level}, c.args...))
			cmd.SetOut(new(bytes.Buffer))
			cmd.SetErr(new(bytes.Buffer))
			err := cmd.Execute()
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-O "+level) {
				t.Errorf("%s -O %s: %v; want a usage error naming -O %s", c.name, level, err, level)
			}
		}
	}
	if err := checkLevel(0); err != nil {
		t.Errorf("-O 0: %v", err)
	}
	if err := checkLevel(3); err != nil {
		t.Errorf("-O 3: %v", err)
	}
}

// TestExecutableFileIsReadableByAll: a .kiln file is written 0644, so another user (a
// server's) can run it, not 0600 as a temporary file starts.
func TestExecutableFileIsReadableByAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.kiln")
	if err := writeFileAtomic(path, []byte("exe")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("%s is %v, want -rw-r--r--", path, st.Mode().Perm())
	}
}

// TestBenchReportsTheThreadsItUsed: with --threads 0 bench reports the threads it ran
// on (every core), in its line and in --json, never "0 threads".
func TestBenchReportsTheThreadsItUsed(t *testing.T) {
	model, _ := filepath.Abs("../../examples/mlp/model.onnx")
	journal := t.TempDir()
	run := func(args ...string) string {
		cmd := benchCmd()
		var out bytes.Buffer
		cmd.SetArgs(append([]string{model, "--threads", "0", "--iters", "2", "--warmup", "0", "--quiet", "--cache-dir", journal, "--dims", "batch=3"}, args...))
		cmd.SetOut(&out)
		cmd.SetErr(new(bytes.Buffer))
		if err := cmd.Execute(); err != nil {
			if strings.Contains(err.Error(), "C compiler") {
				testdata.NoCompiler(t, err)
			}
			t.Fatal(err)
		}
		return out.String()
	}
	var r benchResult
	if err := json.Unmarshal([]byte(run("--json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Threads != runtime.NumCPU() {
		t.Fatalf("--json: threads %d, want %d (every core)", r.Threads, runtime.NumCPU())
	}
	if line := run(); !strings.Contains(line, " on "+strconv.Itoa(runtime.NumCPU())+" threads:") {
		t.Fatalf("bench line %q does not name the %d threads it used", line, runtime.NumCPU())
	}
}
