package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the writer process: run starts os.Executable
// (here the test binary) with writerEnv set.
func TestMain(m *testing.M) {
	if dir := os.Getenv(writerEnv); dir != "" {
		os.Exit(writer(dir, os.Getenv(writerSeedEnv)))
	}
	os.Exit(m.Run())
}

// TestCrash is the crash test with a reduced count: 15 kills (JOURNALCRASH_KILLS
// overrides it; JOURNALCRASH_SEED fixes the schedule), each followed by Open, Verify and
// a read of every entry.
func TestCrash(t *testing.T) {
	kills := 15
	if testing.Short() {
		kills = 6
	}
	if v, err := strconv.Atoi(os.Getenv("JOURNALCRASH_KILLS")); err == nil && v > 0 {
		kills = v
	}
	seed := time.Now().UnixNano() % 1_000_000_007
	if v, err := strconv.ParseInt(os.Getenv("JOURNALCRASH_SEED"), 10, 64); err == nil && v != 0 {
		seed = v
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := config{Kills: kills, Dir: dir, Seed: seed, Exe: exe, MaxDelay: time.Second}
	start := time.Now()
	sum, err := run(cfg)
	sum.Wall = time.Since(start)
	t.Logf("seed %d\n%s", seed, sum)
	if err != nil {
		t.Fatalf("seed %d (JOURNALCRASH_SEED=%d reruns this schedule): %v", seed, seed, err)
	}
	if sum.Kills != kills || sum.Stats.Corrupt != 0 {
		t.Fatalf("%d kills, %d corrupt", sum.Kills, sum.Stats.Corrupt)
	}
}
