package compilecache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func tuningJournal(t *testing.T) *Journal {
	t.Helper()
	j, err := Open(Options{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestTuningRecordKeepsTheFastestPerWorkloadAndTarget(t *testing.T) {
	j := tuningJournal(t)
	r := TuningRecord{Workload: "w1", Target: "cpu A", Strategy: "s", Knobs: "KC=128", Speedup: 1.3, Trials: 5}
	for _, x := range []TuningRecord{r, {Workload: "w1", Target: "cpu A", Strategy: "s", Knobs: "KC=64", Speedup: 1.1},
		{Workload: "w1", Target: "cpu B", Strategy: "s", Knobs: "KC=512", Speedup: 2}} {
		if _, err := j.PutTuning(x); err != nil {
			t.Fatal(err)
		}
	}
	got, err := j.TuningRecords("cpu A")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != r {
		t.Fatalf("records of cpu A = %+v, want only %+v", got, r)
	}
	if TuningDigest(got) == "none" || TuningDigest(nil) != "none" {
		t.Fatalf("digests: %q for a record, %q for none", TuningDigest(got), TuningDigest(nil))
	}
}

func TestCorruptTuningRecordIsQuarantinedAndNotApplied(t *testing.T) {
	j := tuningJournal(t)
	good := TuningRecord{Workload: "w1", Target: "cpu", Strategy: "s", Knobs: "MC=4", Speedup: 1.2}
	bad := TuningRecord{Workload: "w2", Target: "cpu", Strategy: "s", Knobs: "MC=16", Speedup: 1.5}
	for _, r := range []TuningRecord{good, bad} {
		if _, err := j.PutTuning(r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(j.Dir(), tuningDir, bad.name())
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(data, []byte("MC=16"), []byte("MC=17"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := j.TuningRecords("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != good {
		t.Fatalf("records = %+v, want only the intact one", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the damaged record is still in tuning/: %v", err)
	}
	q, _ := filepath.Glob(filepath.Join(j.Dir(), "quarantine", "tuning-*"))
	if len(q) != 1 {
		t.Fatalf("quarantine holds %v, want the damaged record", q)
	}
}

func TestTuningRecordsTravelInExports(t *testing.T) {
	src, dst := tuningJournal(t), tuningJournal(t)
	r := TuningRecord{Workload: "w", Target: "cpu", Strategy: "s", Knobs: "KC=64", Speedup: 1.4}
	if _, err := src.PutTuning(r); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := src.Export(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Import(&buf); err != nil {
		t.Fatal(err)
	}
	got, _ := dst.TuningRecords("cpu")
	if len(got) != 1 || got[0] != r {
		t.Fatalf("imported records = %+v, want %+v", got, r)
	}
}

func TestTuningRecordsOfTwoThreadCountsAreKeptApart(t *testing.T) {
	j := tuningJournal(t)
	unknown := TuningRecord{Workload: "w", Target: "cpu", Strategy: "s", Knobs: "KC=128", Speedup: 1.2}
	one := TuningRecord{Workload: "w", Target: "cpu", Threads: 1, Strategy: "s", Knobs: "KC=64", Speedup: 1.4}
	two := TuningRecord{Workload: "w", Target: "cpu", Threads: 2, Strategy: "s", Knobs: "KC=256", Speedup: 1.1}
	for _, r := range []TuningRecord{unknown, one, two} {
		if kept, err := j.PutTuning(r); err != nil || !kept {
			t.Fatalf("put %+v: kept %v, %v", r, kept, err)
		}
	}
	got, err := j.TuningRecords("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != unknown || got[1] != one || got[2] != two {
		t.Fatalf("records = %+v, want the three thread counts (0: unknown)", got)
	}
	if TuningDigest(got[1:2]) == TuningDigest(got[2:]) {
		t.Fatal("records differing only in their thread count have one digest")
	}
}
