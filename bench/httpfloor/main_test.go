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
	for _, s := range floorServers(config{computeAs: "work"}) {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s) + ` +median p50 ([0-9.]+) ms`)
		m := re.FindSubmatch(out)
		if m == nil {
			t.Fatalf("no median line for %s in:\n%s", s, out)
		}
		// a request cannot answer before its 1 ms of compute by the clock; the fixed
		// work calibrated to take 1 ms back to back may run a little faster later
		least := 0.7
		if s == clockFloor {
			least = 1
		}
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v < least {
			t.Errorf("%s: median p50 %s ms, want at least %g ms for its 1 ms compute", s, m[1], least)
		}
	}
	if testing.Verbose() {
		os.Stdout.Write(out)
	}
}

// TestFloorMeasuresKilnBesideTheFloor runs --kiln on a zoo model for one short round:
// kiln serve answers over REST and gRPC, kiln bench times the same journal entry, and
// the report sets kiln's overheads beside the floor servers'.
func TestFloorMeasuresKilnBesideTheFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kiln and the floor, compiles a model")
	}
	zoo := testdata.Zoo(t)
	if _, err := exec.LookPath("cc"); err != nil {
		testdata.NoCompiler(t, err)
	}
	dir := t.TempDir()
	floor, kiln := filepath.Join(dir, "httpfloor"), filepath.Join(dir, "kiln")
	if out, err := exec.Command("go", "build", "-o", floor, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", kiln, "../../cmd/kiln").CombinedOutput(); err != nil {
		t.Fatalf("go build kiln: %v\n%s", err, out)
	}
	cmd := exec.Command(floor, "--kiln", kiln, "--model", filepath.Join(zoo, "squeezenet1_1"), "--rounds", "1", "--requests", "5")
	cmd.Env = append(os.Environ(), "KILN_CACHE_DIR="+filepath.Join(dir, "cache"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("httpfloor --kiln: %v\n%s", err, out)
	}
	for _, s := range append([]string{"kiln REST", "kiln gRPC"}, floorServers(config{computeAs: "work"})...) {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s) + ` +median p50 ([0-9.]+) ms: [+-][0-9.]+ ms over in process`)
		if re.Find(out) == nil {
			t.Errorf("no median line for %s in:\n%s", s, out)
		}
	}
	if !regexp.MustCompile(`(?m)^kiln REST overhead minus net/http's: [+-][0-9.]+ ms$`).Match(out) {
		t.Errorf("no comparison line in:\n%s", out)
	}
}
