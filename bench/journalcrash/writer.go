package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The writer process: selected by writerEnv (the cache directory), seeded by
// writerSeedEnv. It runs until it is killed; it exits by itself only on a failure.
const (
	writerEnv     = "KILN_JOURNALCRASH_WRITER"
	writerSeedEnv = "KILN_JOURNALCRASH_WRITER_SEED"
)

// Exit codes of a writer that stopped by itself.
const (
	exitWrongContent = 3 // a Get or Do returned content other than what was written
	exitError        = 4 // an operation failed that must not (Open, Put, GC, a non-miss Get error)
	exitVerify       = 5 // Verify reported a damaged entry
)

var exitNames = map[int]string{exitWrongContent: "read wrong content", exitError: "an operation failed", exitVerify: "verify found a damaged entry"}

// Events a writer reports on its standard output, one byte each.
const (
	evOpen    = 'O' // the journal opened
	evPut     = 'P' // Put returned (the entry is published)
	evHit     = 'G' // Get returned content, checked
	evMiss    = 'M' // Get missed
	evBuilt   = 'B' // Do built and published
	evDoHit   = 'H' // Do found the entry
	evWaited  = 'W' // Do waited for another process's build
	evShared  = 'S' // Do shared another goroutine's build
	evGC      = 'C' // GC finished
	evEvicted = 'E' // GC evicted an entry
	evVerify  = 'V' // Verify found nothing damaged
)

// writerBudget bounds the blob bytes a writer's Put keeps (evicting beyond it); GC is
// given smaller budgets at times.
const writerBudget = 48 << 20

type writerProc struct {
	j  *compilecache.Journal
	mu sync.Mutex
}

func (w *writerProc) event(ev byte) {
	w.mu.Lock()
	os.Stdout.Write([]byte{ev})
	w.mu.Unlock()
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "writer %d: %s: %s\n", os.Getpid(), exitNames[code], fmt.Sprintf(format, args...))
	os.Exit(code)
}

func writer(dir, seedText string) int {
	seed, _ := strconv.ParseUint(seedText, 10, 64)
	log := zap.New(quietCore{zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel)})
	j, err := compilecache.Open(compilecache.Options{Dir: dir, Budget: writerBudget, Log: log, LeaseTTL: 3 * time.Second, Poll: 5 * time.Millisecond})
	if err != nil {
		fail(exitError, "open: %v", err)
	}
	w := &writerProc{j: j}
	w.event(evOpen)
	for g := range 2 {
		go w.loop(rand.New(rand.NewPCG(seed, uint64(g))))
	}
	if seed%2 == 0 {
		go w.appender(rand.New(rand.NewPCG(seed, 2)))
	}
	select {}
}

// appender re-puts the small-content, large-record keys back to back, so that a good
// share of a writer's time is spent inside a journal write(2) of hundreds of KiB: a kill
// there leaves a torn tail.
func (w *writerProc) appender(r *rand.Rand) {
	for {
		s := heavySeeds[r.IntN(len(heavySeeds))]
		if err := w.j.Put(material(s, 0), label(s, 0), content(s), rawFrom(s, 0)); err != nil {
			fail(exitError, "put %s: %v", label(s, 0), err)
		}
		w.event(evPut)
	}
}

func (w *writerProc) loop(r *rand.Rand) {
	pick := func() (int, int) { return r.IntN(numSeeds), r.IntN(numVariants) }
	for {
		switch p := r.IntN(1000); {
		case p < 300:
			s, v := pick()
			if r.IntN(6) == 0 {
				s, v = heavySeeds[r.IntN(len(heavySeeds))], 0
			}
			if err := w.j.Put(material(s, v), label(s, v), content(s), rawFrom(s, v)); err != nil {
				fail(exitError, "put %s: %v", label(s, v), err)
			}
			w.event(evPut)
		case p < 550:
			w.get(pick())
		case p < 650:
			es, err := w.j.Entries()
			if err != nil {
				fail(exitError, "entries: %v", err)
			}
			if len(es) > 0 {
				s, v, err := parseMaterial(es[r.IntN(len(es))].Material)
				if err != nil {
					fail(exitWrongContent, "entry: %v", err)
				}
				w.get(s, v)
			}
		case p < 930:
			s, v := pick()
			if r.IntN(2) == 0 { // a hot set, so two writers contend for build locks
				s, v = 100+r.IntN(6), 1
			}
			pause := time.Duration(0)
			if r.IntN(3) == 0 {
				pause = time.Duration(r.IntN(20)) * time.Millisecond
			}
			res, err := w.j.Do(context.Background(), material(s, v), label(s, v), func(context.Context) ([]byte, int, error) {
				time.Sleep(pause) // a compile holding the build lock
				return content(s), rawFrom(s, v), nil
			})
			if err != nil {
				fail(exitError, "do %s: %v", label(s, v), err)
			}
			if err := checkContent(s, v, res.Blob.Bytes()); err != nil {
				fail(exitWrongContent, "do (%s): %v", res.Outcome, err)
			}
			switch res.Outcome {
			case compilecache.Built:
				w.event(evBuilt)
			case compilecache.Hit:
				w.event(evDoHit)
			case compilecache.Waited:
				w.event(evWaited)
			case compilecache.Shared:
				w.event(evShared)
			default:
				fail(exitError, "do %s: outcome %s", label(s, v), res.Outcome)
			}
		case p < 975:
			o := compilecache.GCOptions{}
			if r.IntN(2) == 0 {
				o.Budget = int64(8<<20 + r.IntN(32<<20))
			}
			if r.IntN(2) == 0 {
				o.Grace = time.Millisecond // fresh orphans too (a publish in progress writes its blob again)
			}
			rep, err := w.j.GC(o)
			if err != nil {
				fail(exitError, "gc: %v", err)
			}
			for range rep.Evicted {
				w.event(evEvicted)
			}
			w.event(evGC)
		default:
			_, probs, err := w.j.Verify()
			if err != nil {
				fail(exitError, "verify: %v", err)
			}
			if len(probs) > 0 {
				fail(exitVerify, "%d problems, the first: entry %s (%s): %v", len(probs), probs[0].Entry.Key.Short(), probs[0].Entry.Label, probs[0].Err)
			}
			w.event(evVerify)
		}
	}
}

func (w *writerProc) get(s, v int) {
	b, err := w.j.Get(material(s, v))
	if errors.Is(err, compilecache.ErrMiss) {
		w.event(evMiss)
		return
	}
	if err != nil {
		fail(exitError, "get %s: %v", label(s, v), err)
	}
	if err := checkContent(s, v, b.Bytes()); err != nil {
		fail(exitWrongContent, "get: %v", err)
	}
	w.event(evHit)
}

// quietCore leaves out the per-operation info lines (misses, waits) so a writer's
// standard error carries what the parent counts: truncations, evictions, takeovers,
// and anything that went wrong.
type quietCore struct{ zapcore.Core }

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch e.Message {
	case "cache miss", "waiting for another process's build":
		return ce
	}
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c quietCore) With(f []zapcore.Field) zapcore.Core { return quietCore{c.Core.With(f)} }
