package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tableRows splits the table in out into rows of cells, keyed by "model threads" (the
// header by "model threads" too): tabwriter pads cells with two spaces or more.
func tableRows(out string) map[string]map[string]string {
	var header []string
	rows := map[string]map[string]string{}
	sep := regexp.MustCompile(`\s{2,}`)
	for _, l := range strings.Split(out, "\n") {
		f := sep.Split(strings.TrimSpace(l), -1)
		if len(f) > 0 && f[0] == "model" {
			header = f
			continue
		}
		if header == nil || len(f) < 3 {
			continue
		}
		row := map[string]string{}
		for i, c := range f {
			if i < len(header) {
				row[header[i]] = c
			}
		}
		rows[f[0]+" "+f[2]] = row
	}
	return rows
}

// TestOpenCLEngineComparedToKilnAndORT runs the driver with --engines kiln,kiln-opencl,ort --levels
// 0,3 on the fake kiln (2.5 ms at -O 3, 10 ms for the OpenCL executable) and ORT (2
// ms): the OpenCL executable is compiled once, at the highest level with --target
// opencl, and benchmarked with --target opencl in every round after kiln; the table
// shows its p50, opencl/kiln 4.00 (over the highest level), opencl/ORT 5.00 and its
// compile time. A model that does not compile for OpenCL keeps its CPU and ORT
// figures and gets an "opencl:" note.
func TestOpenCLEngineComparedToKilnAndORT(t *testing.T) {
	fb := newFakeBench(t, "good", "nogpu")
	logPath := filepath.Join(fb.dir, "runs.log")
	t.Setenv("FAKE_LOG", logPath)
	jsonPath := filepath.Join(fb.dir, "out.json")
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--kiln", fb.kiln, "--node", fb.node, "--ort-dir", fb.ortDir, "--zoo", fb.zoo,
		"--models", "good,nogpu", "--threads", "1", "--rounds", "2", "--levels", "0,3",
		"--engines", "kiln,kiln-opencl,ort", "--json", jsonPath}, &stdout, &stderr)
	if rc != 1 {
		t.Fatalf("rc = %d, want 1 (nogpu fails for OpenCL)\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for range 2 { // probe and round 1; round 2 rotated by one
		want = append(want, "kiln-O0 t1", "kiln-O3 t1", "kiln-opencl-O3 t1", "ort t1")
	}
	want = append(want, "kiln-O3 t1", "kiln-opencl-O3 t1", "ort t1", "kiln-O0 t1")
	for range 2 {
		want = append(want, "kiln-O0 t1", "kiln-O3 t1", "ort t1")
	}
	want = append(want, "kiln-O3 t1", "ort t1", "kiln-O0 t1")
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
	good, nogpu := rep.Models[0], rep.Models[1]
	c := good.Rows[0].Engines[engineOpenCL]
	if good.OpenCLS <= 0 || good.OpenCLErr != "" || c == nil || c.MedianP50 != 10 || len(c.Runs) != 2 || c.Level != nil || c.Err != "" {
		t.Fatalf("good: compile %v %q, runs %+v", good.OpenCLS, good.OpenCLErr, c)
	}
	if !strings.Contains(nogpu.OpenCLErr, "no OpenCL device for Baz") || nogpu.CompileErr != "" ||
		nogpu.Rows[0].Engines[engineOpenCL].Err == "" || nogpu.Rows[0].Engines[engineKiln].MedianP50 != 2.5 {
		t.Fatalf("nogpu: %+v / %+v", nogpu, nogpu.Rows[0].Engines)
	}

	out := stdout.String()
	rows := tableRows(out)
	for key, want := range map[string]map[string]string{
		"good 1":  {"O3 p50 ms": "2.500", "opencl p50 ms": "10.000", "opencl/kiln": "4.00", "opencl/ORT": "5.00"},
		"nogpu 1": {"O3 p50 ms": "2.500", "opencl p50 ms": "error", "opencl/kiln": "-", "opencl/ORT": "-", "opencl compile s": "-"},
	} {
		for col, w := range want {
			if got := rows[key][col]; got != w {
				t.Errorf("row %q column %q: %q, want %q", key, col, got, w)
			}
		}
	}
	if cs := rows["good 1"]["opencl compile s"]; cs == "" || cs == "-" {
		t.Errorf("good: opencl compile s %q", cs)
	}
	if n := rows["nogpu 1"]["notes"]; !strings.Contains(n, "opencl: kiln compile: exit status 1: kiln: no OpenCL device for Baz") {
		t.Errorf("nogpu notes %q", n)
	}
	for _, want := range []string{
		"geometric mean opencl/kiln at 1 thread(s): 4.00 over 1 model(s)",
		"geometric mean opencl/ORT at 1 thread(s): 5.00 over 1 model(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	var again bytes.Buffer
	printTable(&again, &rep)
	if !strings.HasSuffix(out, again.String()) {
		t.Errorf("table from the JSON differs:\n%s", &again)
	}
}

// TestOpenCLEngineRunsWithoutTheKilnEngine: kiln-opencl alone (no kiln engine) still builds or finds
// the kiln binary and measures; opencl/kiln has nothing to divide by.
func TestOpenCLEngineRunsWithoutTheKilnEngine(t *testing.T) {
	fb := newFakeBench(t, "good")
	var stdout, stderr bytes.Buffer
	rc := realMain([]string{"--kiln", fb.kiln, "--node", fb.node, "--ort-dir", fb.ortDir, "--zoo", fb.zoo,
		"--models", "good", "--threads", "1", "--rounds", "1", "--engines", "kiln-opencl,ort"}, &stdout, &stderr)
	if rc != 0 {
		t.Fatalf("rc = %d, want 0\nstdout:\n%s\nstderr:\n%s", rc, &stdout, &stderr)
	}
	row := tableRows(stdout.String())["good 1"]
	if row["opencl p50 ms"] != "10.000" || row["opencl/ORT"] != "5.00" || row["opencl/kiln"] != "-" {
		t.Fatalf("row %q\n%s", row, &stdout)
	}
}
