//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestFloorRuns builds the command, runs one short round and checks that every server
// answered and was timed: the program must not rot between the times it is run by hand.
func TestFloorRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and three servers")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		testdata.NoCompiler(t, err) // httpfloor compiles its servers with cc
	}
	bin := filepath.Join(t.TempDir(), "httpfloor")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--rounds", "1", "--requests", "20", "--compute", "1ms").CombinedOutput()
	if err != nil {
		t.Fatalf("httpfloor: %v\n%s", err, out)
	}
	for _, s := range servers {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s) + ` +median p50 ([0-9.]+) ms`)
		m := re.FindSubmatch(out)
		if m == nil {
			t.Fatalf("no median line for %s in:\n%s", s, out)
		}
		// a request cannot answer before its 1 ms of compute
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v < 1 {
			t.Errorf("%s: median p50 %s ms, want at least the 1 ms compute", s, m[1])
		}
	}
	if testing.Verbose() {
		os.Stdout.Write(out)
	}
}
