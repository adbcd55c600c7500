//go:build !serveonly

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tune"
)

// tuneChildCommand is the hidden subcommand the tuner re-executes kiln with to measure
// candidates in a process of their own.
const tuneChildCommand = "tune-measure"

func tuneCmd() *cobra.Command {
	var (
		trials, threads, perRound, reps, maxTasks int
		budget, measureTimeout                    time.Duration
		minSpeedup                                float64
		seed                                      uint64
		quiet, asJSON                             bool
		recordTo                                  string
		shapeInputs                               shapeFlags
		cf                                        cacheFlags
	)
	cmd := &cobra.Command{
		Use:   "tune MODEL",
		Short: "Measure other schedules of the model's kernels and keep the fastest as tuning records in the journal",
		Long: `Measure the model's kernels under their default schedules, then, within --trials
and --time-budget, other strategies and knob values for the kernels that take the most
time: random ones first, then those a cost model trained on the measurements ranks
best. Each measurement compiles and runs the model in a child process (killed after
--measure-timeout), checks every candidate's outputs against the defaults' on the
same random inputs and times it against the defaults in the same run; a candidate
that does not build, crashes, hangs or computes another result is recorded invalid.
The best candidates are measured again together; those still --min-speedup faster
become tuning records in the journal, which every later compile for this target and
device applies (kiln inspect --plan shows them; --no-tuning ignores them).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if trials <= 0 && budget <= 0 {
				return usageError{fmt.Errorf("give --trials or --time-budget")}
			}
			path, _, err := modelArg(args[0])
			if err != nil {
				return err
			}
			sig, err := onnx.LoadSignature(path)
			if err != nil {
				return err
			}
			inputs, err := shapeInputs.shapes(sig)
			if err != nil {
				return err
			}
			j, err := cf.open(newLogger(true))
			if err != nil {
				return err
			}
			defer j.Close()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			o := tune.Options{Model: path, Inputs: engine.ShapesOf(inputs), Threads: threads, Journal: j,
				Measurer: tune.Child{Command: []string{self, tuneChildCommand}, Timeout: measureTimeout},
				Trials:   trials, Budget: budget, PerRound: perRound, Reps: reps, MaxTasks: maxTasks, MinSpeedup: minSpeedup, Seed: seed}
			if recordTo != "" {
				f, err := os.Create(recordTo)
				if err != nil {
					return err
				}
				defer f.Close()
				o.Measurements = f
			}
			var bar *tuneBar
			if !quiet && !asJSON {
				bar = newTuneBar(os.Stderr, trials, budget)
				o.Progress = bar.update
			}
			rep, err := tune.Run(ctx, o)
			if bar != nil {
				bar.finish()
			}
			if err != nil && rep == nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return errors.Join(json.NewEncoder(w).Encode(rep), err)
			}
			printTuneReport(w, rep)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&trials, "trials", 0, "candidates to measure (0: as many as --time-budget allows)")
	f.DurationVar(&budget, "time-budget", 0, "time to spend, e.g. 5m (0: until --trials are measured)")
	f.IntVar(&threads, "threads", 0, "threads the kernels run on while measured, as served (0: every core)")
	f.IntVar(&perRound, "per-round", 3, "assignments compiled and timed beside the defaults in one measurement")
	f.IntVar(&reps, "reps", 5, "profiled runs of each executable per measurement (medians are compared)")
	f.IntVar(&maxTasks, "max-tasks", 24, "kernels tuned, the most expensive first")
	f.Float64Var(&minSpeedup, "min-speedup", 1.03, "least confirmed speedup a record is kept for")
	f.Uint64Var(&seed, "seed", 1, "seed of the search and of the random inputs")
	f.DurationVar(&measureTimeout, "measure-timeout", 10*time.Minute, "kill a measurement (and mark its candidates invalid) after this long")
	f.BoolVar(&quiet, "quiet", false, "no progress bar")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&recordTo, "record-measurements", "", "write every task and measured candidate to this file as JSON lines (the cost model's data)")
	_ = f.MarkHidden("record-measurements")
	shapeInputs.register(cmd)
	cf.register(f, "on")
	return cmd
}

// tuneChildCmd is the measuring child: a tune.Request as JSON on stdin, the
// tune.Response on stdout.
func tuneChildCmd() *cobra.Command {
	return &cobra.Command{
		Use:    tuneChildCommand,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rc := tune.ChildMain(context.Background(), os.Stdin, os.Stdout, os.Stderr, tune.MeasureOptions{}); rc != 0 {
				os.Exit(rc)
			}
			return nil
		},
	}
}

// tuneBar shows trials, the best speedup of the most expensive tasks and the time left.
type tuneBar struct {
	bar    *progressbar.ProgressBar
	trials int
}

func newTuneBar(w io.Writer, trials int, budget time.Duration) *tuneBar {
	total := trials
	if budget > 0 {
		total = int(budget.Seconds()) // the bar follows the time
		trials = 0
	}
	return &tuneBar{trials: trials, bar: progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(20),
		progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(false))}
}

func (b *tuneBar) update(p tune.Progress) {
	var best []string
	for i, t := range p.Tasks {
		if i == 3 {
			break
		}
		best = append(best, fmt.Sprintf("%s ×%.2f", shortWorkload(t.Workload), t.BestSpeedup))
	}
	b.bar.Describe(fmt.Sprintf("%d trials (%d invalid), best: %s, ETA %v", p.Trials, p.Invalid, strings.Join(best, ", "), p.ETA.Round(time.Second)))
	if b.trials > 0 {
		b.bar.Set(p.Trials)
	} else {
		b.bar.Set(int(p.Elapsed.Seconds()))
	}
}

func (b *tuneBar) finish() { b.bar.Finish() }

// shortWorkload is the op and the first hex digits of a workload key.
func shortWorkload(w string) string {
	if i := strings.LastIndexByte(w, '-'); i >= 0 && len(w) > i+7 {
		return w[:i+7]
	}
	return w
}

func printTuneReport(w io.Writer, rep *tune.Report) {
	fmt.Fprintf(w, "%d trials (%d invalid) in %v on %s, %d threads, kernels timed by the %s clock\n", rep.Trials, rep.Invalid, rep.Took.Round(time.Second), rep.Target, rep.Threads, rep.Clock)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tanchor\tlaunches\ttime\tshare\ttrials\tinvalid\tbest\tspeedup\tconfirmed\trecord")
	for _, t := range rep.Tasks {
		rec, best := "-", t.Best.String()
		if t.Recorded {
			rec = "kept"
		}
		if t.BestSpeedup == 1 {
			best = "default (" + t.Strategy + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f ms\t%.1f%%\t%d\t%d\t%s\t×%.2f\t×%.2f\t%s\n", shortWorkload(t.Workload), t.Anchor, t.Launches, t.Seconds*1000,
			100*t.Share, t.Trials, t.Invalid, best, t.BestSpeedup, t.Confirmed, rec)
	}
	tw.Flush()
	for _, t := range rep.Tasks {
		for why, n := range t.Failures {
			fmt.Fprintf(w, "invalid: %s: %d× %s\n", shortWorkload(t.Workload), n, why)
		}
	}
}
