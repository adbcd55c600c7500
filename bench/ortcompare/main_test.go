package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/loader/onnx"
)

// sampleKiln is a `kiln bench --json` line as the interface specifies it.
const sampleKiln = `{"engine":"kiln","p50_ms":9.125,"p90_ms":9.5,"p99_ms":10.25,"min_ms":8.875,"mean_ms":9.2,"iters":100,"threads":2,"compile_s":3.4}`

func TestParseResultKiln(t *testing.T) {
	out := "kiln: loading model.kiln\nwarming up\n" + sampleKiln + "\n\n"
	r, raw, err := parseResult([]byte(out), "kiln", 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Engine: "kiln", P50: 9.125, P90: 9.5, P99: 10.25, Min: 8.875, Mean: 9.2, Iters: 100, Threads: 2}
	if r.CompileS == nil || *r.CompileS != 3.4 {
		t.Fatalf("compile_s = %v, want 3.4", r.CompileS)
	}
	r.CompileS = nil
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	if string(raw) != sampleKiln {
		t.Fatalf("raw = %s", raw)
	}
	// Zero iteration and thread counts skip those checks.
	if _, _, err := parseResult([]byte(sampleKiln), "kiln", 0, 0); err != nil {
		t.Fatal(err)
	}
}

func TestParseResultORT(t *testing.T) {
	line := `{"engine":"ort","p50_ms":18.6,"p90_ms":19.1,"p99_ms":21,"min_ms":18.2,"mean_ms":18.7,"iters":40,"threads":1,"warmup":4,"load_ms":120.5,"version":"1.30.0"}`
	r, _, err := parseResult([]byte(line), "ort", 40, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.P50 != 18.6 || r.CompileS != nil {
		t.Fatalf("got %+v", r)
	}
}

func TestParseResultErrors(t *testing.T) {
	cases := map[string]struct {
		out      string
		engine   string
		iters, t int
		want     string
	}{
		"empty":           {"", "kiln", 100, 2, "no JSON result line"},
		"no json":         {"error: something\n", "kiln", 100, 2, "no JSON result line"},
		"malformed":       {`{"engine":"kiln","p50_ms":}`, "kiln", 100, 2, "decoding"},
		"wrong engine":    {sampleKiln, "ort", 100, 2, `from engine "kiln"`},
		"iters mismatch":  {sampleKiln, "kiln", 50, 2, "ran 100 iterations, asked for 50"},
		"thread mismatch": {sampleKiln, "kiln", 100, 1, "ran on 2 threads, asked for 1"},
		"missing p50":     {strings.Replace(sampleKiln, `"p50_ms":9.125,`, "", 1), "kiln", 100, 2, "lacks p50_ms"},
		"missing several": {`{"engine":"kiln","p50_ms":1}`, "kiln", 0, 0, "lacks p90_ms, p99_ms, min_ms, mean_ms, iters, threads"},
		"zero latency":    {strings.Replace(sampleKiln, `"min_ms":8.875`, `"min_ms":0`, 1), "kiln", 100, 2, "implausible"},
		"out of order":    {strings.Replace(sampleKiln, `"p90_ms":9.5`, `"p90_ms":9.0`, 1), "kiln", 100, 2, "out of order"},
		"string number":   {strings.Replace(sampleKiln, `"p50_ms":9.125`, `"p50_ms":"9.125"`, 1), "kiln", 100, 2, "decoding"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := parseResult([]byte(c.out), c.engine, c.iters, c.t)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{9, 1, 8, 2, 7}, 7}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median(nil) should be NaN")
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 {
		t.Error("median sorted its argument")
	}
}

func TestChooseIters(t *testing.T) {
	target := 750 * time.Millisecond
	for _, c := range []struct {
		p50  float64
		want int
	}{{10, 75}, {0.6, 1250}, {1000, minIters}, {0.0001, maxIters}, {0, minIters}, {math.NaN(), minIters}, {math.Inf(1), minIters}} {
		if got := chooseIters(c.p50, target); got != c.want {
			t.Errorf("chooseIters(%v) = %d, want %d", c.p50, got, c.want)
		}
	}
	if autoWarmup(5) != 3 || autoWarmup(200) != 20 || autoWarmup(20000) != 100 {
		t.Error("autoWarmup out of its bounds")
	}
}

func TestWriteORTInputs(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "mlp", "test_data_set_0")
	dst := t.TempDir()
	m, err := writeORTInputs(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != 1 {
		t.Fatalf("%d inputs, want 1", len(m.Inputs))
	}
	want, err := onnx.ReadTensor(filepath.Join(src, "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	in := m.Inputs[0]
	if in.Index != 0 || in.DType != "FLOAT" || in.File != "input_0.bin" || len(in.Dims) != len(want.Shape) {
		t.Fatalf("manifest entry %+v for %v %v", in, want.DType, want.Shape)
	}
	b, err := os.ReadFile(filepath.Join(dst, "input_0.bin"))
	if err != nil {
		t.Fatal(err)
	}
	data := want.Data.([]float32)
	if len(b) != 4*len(data) {
		t.Fatalf("%d bytes for %d floats", len(b), len(data))
	}
	for i, v := range data {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != v {
			t.Fatalf("element %d = %v, want %v", i, got, v)
		}
	}
	var back Manifest
	mb, err := os.ReadFile(filepath.Join(dst, "inputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &back); err != nil || len(back.Inputs) != 1 || back.Inputs[0].Name != in.Name {
		t.Fatalf("inputs.json does not round-trip: %v %s", err, mb)
	}
	if _, err := writeORTInputs(t.TempDir(), t.TempDir()); err == nil {
		t.Fatal("a folder without input_0.pb should fail")
	}
}

func TestParseFlags(t *testing.T) {
	zoo := t.TempDir()
	for _, name := range []string{"b", "a", "nomodel"} {
		if err := os.MkdirAll(filepath.Join(zoo, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "nomodel" {
			if err := os.WriteFile(filepath.Join(zoo, name, "model.onnx"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var log bytes.Buffer
	cfg, err := parseFlags([]string{"--zoo", zoo}, "/root", &log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Models, ",") != "a,b" || len(cfg.Threads) != 2 || cfg.Rounds != 5 ||
		strings.Join(cfg.Engines, ",") != "kiln,ort" || cfg.ORTDir != filepath.Join("/root", "bench", "ort") ||
		!slices.Equal(cfg.Levels, []int{3}) {
		t.Fatalf("defaults: %+v", cfg)
	}
	t.Setenv("KILN_ZOO", zoo)
	cfg, err = parseFlags([]string{"--models", "x, y", "--threads", "2", "--engines", "ort", "--levels", "3, 0"}, "/root", &log)
	if err != nil || cfg.Zoo != zoo || strings.Join(cfg.Models, ",") != "x,y" || cfg.Threads[0] != 2 || len(cfg.Engines) != 1 ||
		!slices.Equal(cfg.Levels, []int{0, 3}) {
		t.Fatalf("cfg %+v, err %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--threads", "0"}, {"--threads", "a"}, {"--engines", "tvm"}, {"--engines", "ort,ort"},
		{"--rounds", "0"}, {"--iters", "-1"}, {"--warmup", "-2"}, {"stray"}, {"--nosuchflag"},
		{"--levels", "4"}, {"--levels", "-1"}, {"--levels", "O2"}, {"--levels", ","}, {"--levels", "0,3,0"},
	} {
		if _, err := parseFlags(bad, "/root", &log); err == nil {
			t.Errorf("parseFlags(%q) should fail", bad)
		}
	}
}

// fakeKiln is a stand-in for the kiln CLI that honours the interface the driver codes
// against: `compile MODEL -o FILE --input-dir DIR -O L [--target opencl]` writes FILE,
// `bench FILE --input-dir DIR --threads T --iters N --warmup W --json [--target opencl]`
// prints a log line and the JSON line, with a p50 of 2.5 ms at -O 3, 5 ms at -O 0 and
// 10 ms for the OpenCL executable compiled at -O 3 (and appends "kiln-O<L> tT" or
// "kiln-opencl-O<L> tT" to $FAKE_LOG when set). An OpenCL executable benchmarked
// without --target opencl, or compiled below -O 3, fails. A model folder whose name
// contains "broken" fails to compile; one whose name contains "noO0" fails at -O 0
// only, one whose name contains "nogpu" fails for the OpenCL target only.
const fakeKiln = `#!/bin/sh
cmd=$1; shift
case $cmd in
version) echo "kiln fake"; exit 0;;
compile)
  model=$1; shift
  while [ $# -gt 0 ]; do
    case $1 in -o) out=$2; shift;; --input-dir) dir=$2; shift;; -O) level=$2; shift;; --target) target=$2; shift;; esac; shift
  done
  case $model in *broken*) echo "kiln: unsupported op Foo in $model" >&2; exit 1;; esac
  case $model:$level in *noO0*:0) echo "kiln: O0 cannot lower Bar" >&2; exit 1;; esac
  case $model:$target in *nogpu*:opencl) echo "kiln: no OpenCL device for Baz" >&2; exit 1;; esac
  [ -n "$level" ] || { echo "no -O" >&2; exit 1; }
  [ -f "$dir/input_0.pb" ] || { echo "no inputs in $dir" >&2; exit 1; }
  case $target in
  "") echo "O$level${KILN_CPU_ISA:+@$KILN_CPU_ISA}" > "$out";;
  opencl) echo "opencl-O$level" > "$out";;
  *) echo "unknown target $target" >&2; exit 1;;
  esac;;
bench)
  file=$1; shift
  [ -f "$file" ] || { echo "no $file" >&2; exit 1; }
  tag=$(cat "$file")
  while [ $# -gt 0 ]; do
    case $1 in --threads) t=$2; shift;; --iters) n=$2; shift;; --warmup) shift;; --input-dir) shift;; --target) target=$2; shift;; esac; shift
  done
  case $tag:$target in opencl-*:opencl) ;; opencl-*:*) echo "an OpenCL executable needs --target opencl" >&2; exit 1;; esac
  case $tag in *@*) [ "${tag#*@}" = "$KILN_CPU_ISA" ] || { echo "built under ${tag#*@}, run under '$KILN_CPU_ISA'" >&2; exit 1; };; esac
  [ -n "$FAKE_LOG" ] && echo "kiln-$tag t$t" >> "$FAKE_LOG"
  echo "kiln: benchmarking $file"
  case $tag in
  O0) echo "{\"engine\":\"kiln\",\"p50_ms\":5,\"p90_ms\":6,\"p99_ms\":7,\"min_ms\":4,\"mean_ms\":5.2,\"iters\":$n,\"threads\":$t}";;
  opencl-O3) echo "{\"engine\":\"kiln\",\"device\":\"opencl (fake)\",\"p50_ms\":10,\"p90_ms\":11,\"p99_ms\":12,\"min_ms\":9,\"mean_ms\":10.2,\"iters\":$n,\"threads\":$t}";;
  opencl-*) echo "OpenCL executable compiled at $tag" >&2; exit 1;;
  *@generic) echo "{\"engine\":\"kiln\",\"p50_ms\":4,\"p90_ms\":5,\"p99_ms\":6,\"min_ms\":3,\"mean_ms\":4.1,\"iters\":$n,\"threads\":$t}";;
  *) echo "{\"engine\":\"kiln\",\"p50_ms\":2.5,\"p90_ms\":3,\"p99_ms\":3.5,\"min_ms\":2,\"mean_ms\":2.6,\"iters\":$n,\"threads\":$t,\"compile_s\":0.5}";;
  esac;;
*) echo "unknown command $cmd" >&2; exit 2;;
esac
`

// TestDriverWithFakeKiln runs the whole driver with a fake kiln binary: a model that
// compiles and benchmarks, and one whose compile fails, which must not stop the run.
func TestDriverWithFakeKiln(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake kiln is a shell script")
	}
	dir, kiln, zoo := fakeSetup(t, "good", "broken")
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--kiln", kiln, "--engines", "kiln", "--zoo", zoo, "--models", "broken,good,missing",
		"--threads", "1,2", "--rounds", "3", "--json", jsonPath}, &stdout, &stderr)
	if rc != 1 {
		t.Fatalf("rc = %d, want 1 (some models failed)\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{"kiln:    kiln fake", "unsupported op Foo", "missing", "2.500"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	rep := readReport(t, jsonPath)
	if len(rep.Models) != 3 {
		t.Fatalf("%d models in the report, want 3", len(rep.Models))
	}
	good := rep.Models[1]
	if good.Name != "good" || good.CompileS <= 0 || len(good.Rows) != 2 {
		t.Fatalf("good: %+v", good)
	}
	for _, row := range good.Rows {
		k := row.Engines["kiln"]
		if k.Err != "" || len(k.Runs) != 3 || k.MedianP50 != 2.5 || k.Probe == nil || k.Iters != chooseIters(2, 750*time.Millisecond) {
			t.Fatalf("good at %d threads: %+v", row.Threads, k)
		}
		if k.Runs[0].Result.Threads != row.Threads || len(k.Runs[0].Raw) == 0 {
			t.Fatalf("run: %+v", k.Runs[0])
		}
	}
	if rep.Models[0].CompileErr == "" || rep.Models[2].Err == "" {
		t.Fatalf("failures not recorded: %+v / %+v", rep.Models[0], rep.Models[2])
	}
}

// readReport decodes the JSON report at path.
func readReport(t *testing.T, path string) Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// fakeSetup writes the fake kiln and a zoo of empty cases named models (a model file and
// one input in test_data_set_0) into a temporary folder, and returns the folder, the
// fake kiln's path and the zoo's.
func fakeSetup(t *testing.T, models ...string) (dir, kiln, zoo string) {
	t.Helper()
	dir = t.TempDir()
	kiln = filepath.Join(dir, "kiln")
	if err := os.WriteFile(kiln, []byte(fakeKiln), 0o755); err != nil {
		t.Fatal(err)
	}
	zoo = filepath.Join(dir, "zoo")
	for _, name := range models {
		ds := filepath.Join(zoo, name, "test_data_set_0")
		if err := os.MkdirAll(ds, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{filepath.Join(zoo, name, "model.onnx"), filepath.Join(ds, "input_0.pb")} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir, kiln, zoo
}

// TestDriverISAEngines runs kiln under two ISA caps beside the uncapped kiln: each
// cap's executable is compiled and benchmarked with KILN_CPU_ISA set (the fake kiln
// refuses an executable run under another cap) and reported in its own columns.
func TestDriverISAEngines(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake kiln is a shell script")
	}
	dir, kiln, zoo := fakeSetup(t, "good")
	t.Setenv("KILN_CPU_ISA", "") // the uncapped engine runs without a cap
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--kiln", kiln, "--engines", "kiln,kiln@avx2,kiln@generic", "--zoo", zoo,
		"--models", "good", "--threads", "1", "--rounds", "2", "--json", jsonPath}, &stdout, &stderr)
	if rc != 0 {
		t.Fatalf("rc = %d\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}
	for _, want := range []string{"kiln@avx2 p50 ms", "kiln@generic p50 ms", "4.000"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, &stdout)
		}
	}
	rep := readReport(t, jsonPath)
	m := rep.Models[0]
	if m.ISACompileS["avx2"] <= 0 || m.ISACompileS["generic"] <= 0 {
		t.Fatalf("compile times under the caps: %v", m.ISACompileS)
	}
	row := m.Rows[0]
	for e, want := range map[string]float64{"kiln": 2.5, "kiln@avx2": 2.5, "kiln@generic": 4} {
		er := row.Engines[e]
		if er == nil || er.Err != "" || len(er.Runs) != 2 || er.MedianP50 != want {
			t.Errorf("%s: %+v, want 2 runs at p50 %v", e, er, want)
		}
	}
}

func TestISAEngineNames(t *testing.T) {
	if _, err := parseFlags([]string{"--engines", "kiln@avx9"}, t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "avx512, avx2, sse4, generic") {
		t.Errorf("kiln@avx9: %v, want an error listing the caps", err)
	}
	for _, isa := range isaLevels {
		if got := levelISA(isaLevel(isa)); got != isa {
			t.Errorf("levelISA(isaLevel(%s)) = %q", isa, got)
		}
	}
	for _, l := range []int{3, 0, genericLevel, openclLevel} {
		if got := levelISA(l); got != "" {
			t.Errorf("levelISA(%d) = %q, want none", l, got)
		}
	}
}

// TestORTRunner runs bench/ort/bench.js through the driver on the example model. It
// needs node and `npm install` in bench/ort, and skips without them.
func TestORTRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ONNX Runtime")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join("..", "ort", "node_modules", "onnxruntime-node")); err != nil {
		t.Skip("onnxruntime-node is not installed (cd bench/ort && npm install)")
	}
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--engines", "ort", "--zoo", filepath.Join("..", "..", "examples"), "--models", "mlp",
		"--threads", "1", "--rounds", "2", "--iters", "20"}, &stdout, &stderr)
	if rc != 0 {
		t.Fatalf("rc = %d\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "onnxruntime-node 1.") || !strings.Contains(stdout.String(), "mlp") {
		t.Fatalf("unexpected output:\n%s", &stdout)
	}
}
