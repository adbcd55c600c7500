package conformance

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// modelsManifest is the list of the real-model set in the repository; fetch.sh copies
// it into the set when the set is complete.
const modelsManifest = "../../../../bench/models/models.tsv"

// realModelCases returns the cases of the real-model set, after checking that the set
// was fetched from the repository's current list.
func realModelCases(t *testing.T) []string {
	t.Helper()
	dir := testdata.Models(t)
	want, err := os.ReadFile(modelsManifest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "models.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s was fetched from another list than bench/models/models.tsv: run bench/models/fetch.sh again", dir)
	}
	rows := 0
	for _, line := range strings.Split(string(want), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			rows++
		}
	}
	cases, err := FindCases([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != rows {
		t.Fatalf("found %d cases in %s, bench/models/models.tsv lists %d", len(cases), dir, rows)
	}
	return cases
}

// TestRealModels: every model of the real-model set (ONNX files that npm packages ship:
// voice-activity detectors with LSTMs in nested Ifs on values of unknown rank, OCR
// networks, a wake-word head) answers on the reference evaluator as on ONNX Runtime.
func TestRealModels(t *testing.T) {
	runAllPass(t, realModelCases(t), opts())
}

// realModelsCompiled are the cases of the real-model set that the compiled engine
// answers; the others are refused at compile time (an op without a kernel, dims that
// depend on data), which TestRealModelsCompiled logs.
var realModelsCompiled = map[string]bool{
	"oww_hello_deepa":        true,
	"ppocr_mobile_v2_cls":    true,
	"ppocr_v4_det":           true,
	"ppocr_v4_rec":           true,
	"silero_vad_16k_op15":    true,
	"silero_vad_half":        true,
	"silero_vad_legacy":      true,
	"silero_vad_op18_ifless": true,
}

// TestRealModelsCompiled: the real models the compiled engine builds match ONNX
// Runtime, and the others are refused at compile time with a reason, not answered
// wrongly.
func TestRealModelsCompiled(t *testing.T) {
	cases := realModelCases(t)
	o := compiledOpts(t)
	for _, c := range cases {
		name := filepath.Base(c)
		r := RunCase(c, o)
		switch {
		case r.Status == Pass:
			t.Logf("%s: pass in %.2fs, max err %.2g", name, r.Seconds, r.MaxErr)
		case realModelsCompiled[name]:
			t.Errorf("%s: %s: %s", name, r.Status, r.Reason)
		case strings.Contains(r.Reason, "compile failed"):
			t.Logf("%s: refused: %s", name, r.Reason)
		default:
			t.Errorf("%s: %s, not a compile-time refusal: %s", name, r.Status, r.Reason)
		}
	}
}
