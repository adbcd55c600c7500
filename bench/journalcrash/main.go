// Command journalcrash is the crash test of the binary journal (package compilecache).
// It starts writer processes on one cache directory and kills them with SIGKILL at
// random moments; after every kill it opens the journal (a torn tail must be truncated;
// a damaged complete record, or a reset, fails the test: a kill only tears an append),
// verifies every blob in full (zero problems allowed) and reads every entry back,
// comparing the content with what the writer would have written for that entry.
//
// A writer is this program's own binary started again in writer mode (an environment
// variable selects it). It loops until it is killed, from two goroutines: Put of new
// and existing materials (blobs from a few bytes to a few MiB, some with a raw
// incompressible tail, some records with a large material so an append spans pages),
// Get and Do (every content read is checked; a wrong one exits with a distinct code),
// GC with and without a budget (evictions, orphan removal, compaction of the journal by
// rename) and Verify. Some rounds run two writers at once on the directory and kill
// one, then later the other, or both together.
//
// Content is a function of the material's "seed" component only, so several keys share
// a blob, and variant 3 of a seed stores the same content fully compressed where the
// other variants keep a raw tail: the blob file is then replaced under the same name.
//
//	go run ./bench/journalcrash [--kills 200] [--seed N] [--dir D --keep]
//
// It exits 0 with a summary when every check passed, 1 with the first failure.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if dir := os.Getenv(writerEnv); dir != "" {
		os.Exit(writer(dir, os.Getenv(writerSeedEnv)))
	}
	kills := flag.Int("kills", 200, "SIGKILLs to deliver")
	dir := flag.String("dir", "", "cache directory (default: a temporary one, removed at the end)")
	keep := flag.Bool("keep", false, "keep the cache directory")
	seed := flag.Int64("seed", 0, "schedule seed (0: from the clock)")
	verbose := flag.Bool("v", false, "print one line per round")
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000_007
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	d := *dir
	if d == "" {
		if d, err = os.MkdirTemp("", "journalcrash-*"); err != nil {
			fmt.Fprintln(os.Stderr, "journalcrash:", err)
			os.Exit(1)
		}
	}
	cfg := config{Kills: *kills, Dir: d, Seed: *seed, Exe: exe}
	if *verbose {
		cfg.Progress = os.Stdout
	}
	fmt.Printf("journalcrash: %d kills, seed %d, dir %s\n", cfg.Kills, cfg.Seed, d)
	start := time.Now()
	sum, err := run(cfg)
	sum.Wall = time.Since(start)
	fmt.Print(sum.String())
	if err != nil {
		fmt.Fprintf(os.Stderr, "journalcrash: FAIL (seed %d, directory kept at %s): %v\n", cfg.Seed, d, err)
		os.Exit(1)
	}
	if *dir == "" && !*keep {
		os.RemoveAll(d)
	}
	fmt.Println("journalcrash: PASS")
}
