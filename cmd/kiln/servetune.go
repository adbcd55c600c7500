//go:build !serveonly

package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/tune"
)

// serveTuner is kiln serve's background tuner (--tune background): each session is a
// tune.RunGated run over the journal the server compiles through, measured in child
// processes (kiln tune-measure) that wait for the server to be idle; a measurement a
// request interrupts is killed and measured again.
type serveTuner struct {
	journal    *compilecache.Journal
	measurer   tune.Measurer
	minSpeedup float64 // 0: tune's default
}

// newServeTuner measures in children of this executable (nil measurer) or with m.
func newServeTuner(j *compilecache.Journal, m tune.Measurer) (*serveTuner, error) {
	if m == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		m = tune.Child{Command: []string{self, tuneChildCommand}, Timeout: 10 * time.Minute}
	}
	return &serveTuner{journal: j, measurer: m}, nil
}

// Tune implements serve.Tuner.
func (t *serveTuner) Tune(ctx context.Context, job serve.TuneJob) (serve.TuneResult, error) {
	o := tune.Options{Model: job.Path, Inputs: job.Shapes, Threads: job.Threads, Journal: t.journal, Measurer: t.measurer,
		Trials: job.Trials, Budget: job.Budget, MinSpeedup: t.minSpeedup, Seed: 1}
	if job.Progress != nil {
		o.Progress = func(p tune.Progress) { job.Progress(p.Trials, p.Invalid) }
	}
	rep, err := tune.RunGated(ctx, o, job.Gate)
	if errors.Is(err, tune.ErrNoTasks) {
		return serve.TuneResult{}, nil
	}
	if err != nil {
		return serve.TuneResult{}, err
	}
	res := serve.TuneResult{Trials: rep.Trials, Invalid: rep.Invalid}
	for _, task := range rep.Tasks {
		if task.Recorded {
			res.Records++
		}
	}
	return res, nil
}

// serveTuning is the service's background tuning from the tune keys (--tune ...): off,
// or a serveTuner measuring on the journal at the server's threads.
func serveTuning(c configs.Tune, j *compilecache.Journal, threads int) (serve.TuneOptions, error) {
	if c.Mode != "background" {
		return serve.TuneOptions{}, nil
	}
	o, err := tuneBudgetOf(c, threads)
	if err != nil {
		return o, err
	}
	if o.Tuner, err = newServeTuner(j, nil); err != nil {
		return o, err
	}
	return o, nil
}
