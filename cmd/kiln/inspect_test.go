//go:build !serveonly

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestInspectPlanComesFromTheJournal: kiln inspect --plan compiles the model into the
// journal once; a second inspect takes the executable and its plan from the journal
// (no compile) and prints the same plan; --cache off compiles every time.
func TestInspectPlanComesFromTheJournal(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		if _, err := exec.LookPath("cc"); err != nil {
			testdata.NoCompiler(t, err)
		}
	}
	dir := t.TempDir()
	model, _ := filepath.Abs("../../examples/mlp/model.onnx")
	inspect := func(args ...string) (head, plan string) {
		t.Helper()
		cmd := inspectCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--plan", "--dims", "batch=2", "--cache-dir", dir, model}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("inspect --plan %v: %v\n%s", args, err, out.String())
		}
		head, plan, _ = strings.Cut(out.String(), "\n")
		return head, plan
	}
	head1, plan1 := inspect()
	head2, plan2 := inspect()
	head3, plan3 := inspect("--cache", "off")
	if !strings.Contains(head1, "compiled in") || !strings.Contains(head2, "from the journal in") || !strings.Contains(head3, "compiled in") {
		t.Errorf("first, second and --cache off inspect:\n%s\n%s\n%s\nwant compiled, from the journal, compiled", head1, head2, head3)
	}
	if plan2 != plan1 || plan3 != plan1 || !strings.Contains(plan1, "kernel launches per inference") {
		t.Errorf("the plans differ:\ncompiled:\n%s\nfrom the journal:\n%s\n--cache off:\n%s", plan1, plan2, plan3)
	}
}
