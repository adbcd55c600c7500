package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sampleReport is a single-level report with every kind of row: a model measured at
// two thread counts, one whose compile failed and one whose folder is missing.
func sampleReport() *Report {
	runs := func(med, lo, hi float64) *EngineRuns {
		return &EngineRuns{Iters: 100, Warmup: 10, MedianP50: med, MinP50: lo, MaxP50: hi}
	}
	return &Report{
		Machine: Machine{LoadStart: "0.10 0.20 0.30", LoadEnd: "1.00 0.50 0.40"},
		Config:  Config{Threads: []int{1, 2}, Engines: []string{engineKiln, engineORT}},
		Models: []*ModelReport{
			{Name: "resnet18", Label: "1x3x224x224", CompileS: 3.25, Rows: []*Row{
				{Threads: 1, Engines: map[string]*EngineRuns{engineKiln: runs(10, 9, 11), engineORT: runs(20, 19, 20)}, Ratio: 0.5, RatioByRound: 0.48, OthersShare: 0.01},
				{Threads: 2, Engines: map[string]*EngineRuns{engineKiln: runs(6, 6, 6), engineORT: runs(12, 12, 13)}, Ratio: 0.5, RatioByRound: 0.5, OthersShare: -1},
			}},
			{Name: "broken", CompileErr: "kiln compile: exit status 1: unsupported op Foo", Rows: []*Row{
				{Threads: 1, Engines: map[string]*EngineRuns{engineKiln: {Err: "kiln compile: exit status 1: unsupported op Foo"}, engineORT: runs(4, 4, 4)}, OthersShare: 0},
			}},
			{Name: "missing", Err: "missing /zoo/missing/model.onnx"},
		},
	}
}

// TestPrintTableOneLevel: with one level the table is the one printed before --levels
// existed (testdata/table_one_level.txt was written by that code, and has since gained
// the "by round" column), whichever the level.
func TestPrintTableOneLevel(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "table_one_level.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, levels := range [][]int{nil, {3}, {0}} {
		rep := sampleReport()
		rep.Config.Levels = levels
		var b bytes.Buffer
		printTable(&b, rep)
		if b.String() != string(want) {
			t.Errorf("levels %v: table\n%s\nwant\n%s", levels, &b, want)
		}
	}
}
