package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// buildKiln builds the kiln command into a temporary folder.
func buildKiln(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build kiln")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		if _, err := exec.LookPath("cc"); err != nil {
			testdata.NoCompiler(t, err)
		}
	}
	bin := filepath.Join(t.TempDir(), "kiln")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var journalLine = regexp.MustCompile(`journal: \S+ (\w+) \(key (\w+)\)`)

// TestFourProcessesOneCompile: four kiln processes started at once on a cold journal
// compile the model once between them; the others wait for it and load the published
// executable; all give the same outputs. A fifth run later is a hit.
func TestFourProcessesOneCompile(t *testing.T) {
	bin := buildKiln(t)
	dir := t.TempDir()
	model, _ := filepath.Abs("../../examples/mlp/model.onnx")
	inputs, _ := filepath.Abs("../../examples/mlp/test_data_set_0")
	run := func() (outcome, key, stdout string) {
		cmd := exec.Command(bin, "run", "--cache-dir", dir, "--threads", "1", model, "--input-dir", inputs)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Errorf("kiln run: %v\n%s", err, se.String())
			return
		}
		m := journalLine.FindStringSubmatch(se.String())
		if m == nil {
			t.Errorf("no journal line in\n%s", se.String())
			return
		}
		// the first line names the run's duration; the rest are the outputs
		_, rest, _ := strings.Cut(so.String(), "\n")
		return m[1], m[2], rest
	}
	var wg sync.WaitGroup
	outcomes, keys, outs := make([]string, 4), make([]string, 4), make([]string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i], keys[i], outs[i] = run()
		}()
	}
	wg.Wait()
	built := 0
	for i := range 4 {
		if outcomes[i] == "built" {
			built++
		} else if outcomes[i] != "waited" && outcomes[i] != "hit" {
			t.Errorf("process %d: outcome %q", i, outcomes[i])
		}
		if keys[i] != keys[0] || outs[i] != outs[0] || outs[i] == "" {
			t.Errorf("process %d: key %s output %q; process 0: key %s output %q", i, keys[i], outs[i], keys[0], outs[0])
		}
	}
	t.Logf("outcomes of 4 concurrent cold runs: %v", outcomes)
	if built != 1 {
		t.Fatalf("%d compiles among 4 processes (outcomes %v)", built, outcomes)
	}
	if o, _, out := run(); o != "hit" || out != outs[0] {
		t.Fatalf("fifth run: %s", o)
	}
	ls, err := exec.Command(bin, "cache", "ls", "--cache-dir", dir).Output()
	if err != nil || bytes.Count(ls, []byte(" exe ")) != 1 {
		t.Fatalf("cache ls (%v):\n%s", err, ls)
	}
	if out, err := exec.Command(bin, "cache", "verify", "--cache-dir", dir).CombinedOutput(); err != nil || !bytes.Contains(out, []byte(": 0 damaged")) {
		t.Fatalf("cache verify (%v):\n%s", err, out)
	}
	// kiln inspect lists the model's executables in the journal: here the one specialized
	// for the data set's shapes
	out, err := exec.Command(bin, "inspect", model, "--cache-dir", dir).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("1 compiled executables of this model")) || !bytes.Contains(out, []byte("specialized for x[")) {
		t.Fatalf("kiln inspect (%v):\n%s", err, out)
	}
}
