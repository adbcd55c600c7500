package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeNode stands in for node running bench/ort/bench.js: `--version` prints a version;
// otherwise it checks the converted inputs, appends "ort tT" to $FAKE_LOG and prints a
// result line with a p50 of 2 ms.
const fakeNode = `#!/bin/sh
[ "$1" = --version ] && { echo v0.0.0-fake; exit 0; }
shift
while [ $# -gt 0 ]; do
  case $1 in --threads) t=$2; shift;; --iters) n=$2; shift;; --inputs) dir=$2; shift;; esac; shift
done
[ -f "$dir/inputs.json" ] || { echo "no $dir/inputs.json" >&2; exit 1; }
[ -n "$FAKE_LOG" ] && echo "ort t$t" >> "$FAKE_LOG"
echo "{\"engine\":\"ort\",\"p50_ms\":2,\"p90_ms\":2.5,\"p99_ms\":3,\"min_ms\":1.5,\"mean_ms\":2.1,\"iters\":$n,\"threads\":$t}"
`

// fakeBench is a folder with the fake kiln and node, an ORT folder that passes the
// driver's version check and a zoo of models (empty model files, the example MLP's
// input).
type fakeBench struct {
	dir, kiln, node, ortDir, zoo string
}

// newFakeBench sets up a fakeBench whose zoo holds the named models.
func newFakeBench(t *testing.T, models ...string) fakeBench {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fakes are shell scripts")
	}
	dir := t.TempDir()
	fb := fakeBench{dir: dir, kiln: filepath.Join(dir, "kiln"), node: filepath.Join(dir, "node"),
		ortDir: filepath.Join(dir, "ort"), zoo: filepath.Join(dir, "zoo")}
	for f, text := range map[string]string{fb.kiln: fakeKiln, fb.node: fakeNode} {
		if err := os.WriteFile(f, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pkg := filepath.Join(fb.ortDir, "node_modules", "onnxruntime-node")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"9.9.9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	input, err := os.ReadFile(filepath.Join("..", "..", "examples", "mlp", "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range models {
		ds := filepath.Join(fb.zoo, name, "test_data_set_0")
		if err := os.MkdirAll(ds, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fb.zoo, name, "model.onnx"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ds, "input_0.pb"), input, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fb
}

// TestDriverLevels runs the driver with --levels 0,3 on a fake kiln (5 ms at -O 0, 2.5
// ms at -O 3) and a fake ORT runner (2 ms): every level gets its own compile and runs,
// rounds interleave all variants, and the JSON and the table carry each level's p50, its
// ratio to ORT and O3/O0, computed from those timings. A model that fails at -O 0 only
// keeps its O3 figures; one that fails at both levels gets one note.
func TestDriverLevels(t *testing.T) {
	fb := newFakeBench(t, "good", "noO0", "broken")
	dir, kiln, node, ortDir, zoo := fb.dir, fb.kiln, fb.node, fb.ortDir, fb.zoo
	logPath := filepath.Join(dir, "runs.log")
	t.Setenv("FAKE_LOG", logPath)
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--kiln", kiln, "--node", node, "--ort-dir", ortDir, "--zoo", zoo,
		"--models", "good,noO0,broken", "--threads", "1,2", "--rounds", "2", "--levels", "3,0", "--json", jsonPath}, &stdout, &stderr)
	if rc != 1 {
		t.Fatalf("rc = %d, want 1 (noO0 fails at -O 0)\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}

	// Interleaving: per thread count the probes and round 1 run O0, O3 and ORT, round 2
	// the same rotated by one (no engine always first).
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, th := range []string{"t1", "t2"} {
		for range 2 { // probe and round 1
			want = append(want, "kiln-O0 "+th, "kiln-O3 "+th, "ort "+th)
		}
		want = append(want, "kiln-O3 "+th, "ort "+th, "kiln-O0 "+th)
	}
	for _, th := range []string{"t1", "t2"} {
		for range 2 {
			want = append(want, "kiln-O3 "+th, "ort "+th)
		}
		want = append(want, "ort "+th, "kiln-O3 "+th)
	}
	for _, th := range []string{"t1", "t2"} {
		for range 3 {
			want = append(want, "ort "+th)
		}
	}
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); !slices.Equal(got, want) {
		t.Fatalf("run order:\n%s\nwant:\n%s", b, strings.Join(want, "\n"))
	}

	b, err = os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Config.Levels, []int{0, 3}) || len(rep.Models) != 3 {
		t.Fatalf("levels %v, %d models", rep.Config.Levels, len(rep.Models))
	}
	good, noO0 := rep.Models[0], rep.Models[1]
	if len(good.Compiles) != 2 || good.Compiles[0].Level != 0 || good.Compiles[1].Level != 3 ||
		good.Compiles[0].S <= 0 || good.CompileS != good.Compiles[1].S || good.Compiles[0].Err != "" {
		t.Fatalf("good compiles: %+v %+v", good.Compiles[0], good.Compiles[1])
	}
	for _, row := range good.Rows {
		o0, o3, ort := row.Engines["kiln-O0"], row.Engines["kiln"], row.Engines["ort"]
		if o0 == nil || o3 == nil || ort == nil || len(row.Engines) != 3 {
			t.Fatalf("good t=%d engines: %v", row.Threads, row.Engines)
		}
		if o0.MedianP50 != 5 || *o0.Level != 0 || len(o0.Runs) != 2 || o3.MedianP50 != 2.5 || *o3.Level != 3 || ort.MedianP50 != 2 || ort.Level != nil {
			t.Fatalf("good t=%d: O0 %+v, O3 %+v, ORT %+v", row.Threads, o0, o3, ort)
		}
		wantLevels := []LevelResult{{0, "kiln-O0", 5, 2.5}, {3, "kiln", 2.5, 1.25}}
		if len(row.Levels) != 2 || *row.Levels[0] != wantLevels[0] || *row.Levels[1] != wantLevels[1] ||
			row.Ratio != 1.25 || row.RatioHighLow != 0.5 {
			t.Fatalf("good t=%d: levels %+v %+v, ratio %v, O3/O0 %v", row.Threads, row.Levels[0], row.Levels[1], row.Ratio, row.RatioHighLow)
		}
	}
	if !strings.Contains(noO0.Compiles[0].Err, "O0 cannot lower Bar") || noO0.Compiles[1].Err != "" || noO0.CompileErr != "" {
		t.Fatalf("noO0 compiles: %+v %+v", noO0.Compiles[0], noO0.Compiles[1])
	}
	if row := noO0.Rows[0]; row.Engines["kiln-O0"].Err == "" || row.Levels[0].MedianP50 != 0 || row.Levels[1].Ratio != 1.25 || row.RatioHighLow != 0 {
		t.Fatalf("noO0: %+v / %+v %+v", row, row.Levels[0], row.Levels[1])
	}

	out := stdout.String()
	for _, want := range []string{
		"kiln at levels O0,O3",
		"On: kiln compiled with -O n; O3/O0: the highest level's p50 over the lowest's",
		"geometric mean kiln O0/ORT at 1 thread(s): 2.50 over 1 model(s)",
		"geometric mean kiln O3/ORT at 1 thread(s): 1.25 over 2 model(s)",
		"geometric mean kiln O3/O0 at 2 thread(s): 0.50 over 1 model(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 {
			rows[f[0]+" "+f[2]] = f
		}
	}
	wantHeader := "model inputs threads O0 p50 ms O3 p50 ms ORT p50 ms O0/ORT O3/ORT O3/O0 O0 compile s O3 compile s spread O0/O3/ORT others notes"
	if h := strings.Join(rows["model threads"], " "); h != wantHeader {
		t.Errorf("header %q\nwant   %q", h, wantHeader)
	}
	// model inputs threads O0 O3 ORT O0/ORT O3/ORT O3/O0 compile-O0 compile-O3 spread others
	check := func(key string, want ...string) {
		t.Helper()
		f := rows[key]
		if len(f) < 12 {
			t.Errorf("row %q: %q", key, f)
			return
		}
		got := append(slices.Clone(f[:9]), f[11])
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %q: %q, want %q", key, got, want)
		}
	}
	check("good 1", "good", "-", "1", "5.000", "2.500", "2.000", "2.50", "1.25", "0.50", "0%/0%/0%")
	check("good 2", "good", "-", "2", "5.000", "2.500", "2.000", "2.50", "1.25", "0.50", "0%/0%/0%")
	check("noO0 1", "noO0", "-", "1", "error", "2.500", "2.000", "-", "1.25", "-", "-/0%/0%")
	if f := rows["noO0 1"]; f[9] != "error" || !strings.Contains(strings.Join(f, " "), "kiln O0: kiln compile: exit status 1: kiln: O0 cannot lower Bar") {
		t.Errorf("noO0 row: %q", f)
	}
	if l := strings.Join(rows["broken 1"], " "); strings.Count(l, "unsupported op Foo") != 1 || !strings.Contains(l, " kiln: kiln compile:") {
		t.Errorf("broken row: %q", l)
	}

	// The table printed from the JSON is the one the run printed.
	var again bytes.Buffer
	printTable(&again, &rep)
	if !strings.HasSuffix(out, again.String()) {
		t.Errorf("table from the JSON differs:\n%s", &again)
	}
}

// TestSumLevels: with three levels the ratios come from the right engines, O3/O0 takes
// the extremes, and a level without runs has no ratio.
func TestSumLevels(t *testing.T) {
	levels := []int{0, 1, 3}
	if k := []string{kilnKey(0, levels), kilnKey(1, levels), kilnKey(3, levels)}; !slices.Equal(k, []string{"kiln-O0", "kiln-O1", "kiln"}) {
		t.Fatalf("keys %v", k)
	}
	row := &Row{Engines: map[string]*EngineRuns{
		"kiln-O0": {MedianP50: 8}, "kiln-O1": {Err: "failed"}, "kiln": {MedianP50: 2}, "ort": {MedianP50: 4},
	}}
	row.sumLevels(levels)
	want := []LevelResult{{0, "kiln-O0", 8, 2}, {1, "kiln-O1", 0, 0}, {3, "kiln", 2, 0.5}}
	if len(row.Levels) != 3 || row.Ratio != 0.5 || row.RatioHighLow != 0.25 {
		t.Fatalf("ratio %v, high/low %v, %d levels", row.Ratio, row.RatioHighLow, len(row.Levels))
	}
	for i, lr := range row.Levels {
		if *lr != want[i] {
			t.Errorf("level %d: %+v, want %+v", i, *lr, want[i])
		}
	}
	delete(row.Engines, "ort")
	if row.sumLevels(levels); row.Ratio != 0 || row.Levels[0].Ratio != 0 || row.RatioHighLow != 0.25 {
		t.Errorf("without ORT: %+v", row)
	}
}

// TestRoundRatioPairsTheRounds: the ratio by round takes each round's kiln p50 over the
// same round's ORT p50, leaves out rounds where either failed, and takes the median.
// The rounds are tv_regnet_x_400mf's at two threads on machine G (BENCHMARKS.md), where
// a slow spell from round 2 on moved kiln's median (4 slow rounds of 5) and not ORT's
// (2 of 5): the medians' ratio is 1.22, the rounds' 1.08.
func TestRoundRatioPairsTheRounds(t *testing.T) {
	runs := func(p50s ...float64) *EngineRuns {
		er := &EngineRuns{}
		for i, p := range p50s {
			r := &Run{Round: i + 1, Result: &Result{P50: p}}
			if p < 0 {
				r.Result, r.Err = nil, "exit status 1"
			}
			er.Runs = append(er.Runs, r)
		}
		er.summarize()
		return er
	}
	kiln := runs(5.423, 7.333, 7.439, 7.653, 7.658)
	ort := runs(6.065, 5.928, 6.083, 7.130, 7.103)
	if r := ratio(kiln, ort); math.Abs(r-7.439/6.083) > 1e-9 {
		t.Fatalf("ratio of medians %v", r)
	}
	if r := roundRatio(kiln, ort); math.Abs(r-7.658/7.103) > 1e-9 {
		t.Errorf("by round %v, want the median of the rounds' ratios %v", r, 7.658/7.103)
	}
	// a failed round on either side is left out: the other four give an even count
	if r, want := roundRatio(runs(5.423, -1, 7.439, 7.653, 7.658), ort), (7.653/7.130+7.658/7.103)/2; math.Abs(r-want) > 1e-9 {
		t.Errorf("with kiln's round 2 failed: %v, want %v", r, want)
	}
	if r := roundRatio(runs(-1, -1), runs(1, 1)); r != 0 {
		t.Errorf("no round with both: %v, want 0", r)
	}
	if r := roundRatio(nil, ort); r != 0 {
		t.Errorf("no kiln runs: %v, want 0", r)
	}
}
