// Package tune is kiln's auto-tuner (docs/ARCHITECTURE.md, "Auto-tuning"): it measures
// other schedules of a model's kernels where the model is served and keeps the best in
// the journal as tuning records, which compiles then apply.
//
// Model.
//   - Search space. Every strategy declares its knobs (kernels.Knob: name, legal values,
//     the default rule's value); a kernel's space is the strategies that can build it
//     (kernels.Strategies.Space: a convolution's Winograd and direct rules, a matmul's
//     packed rule with KC, MC, parallelism and row blocking, the batched matmul's and
//     Winograd's KC and parallelism, the generic rule's parallel threshold and
//     vectorization) with their knobs. A candidate is a strategy and a knob
//     assignment (Candidate; kernels.Choice); the schedule trace it produces is a
//     function of it.
//   - Tasks. A workload is a kernel's structural key (the compiler's workloadKey: ops,
//     attributes, types, which inputs are constants) and a record adds the target and
//     device fingerprint. Run measures the defaults first: the workloads, their launches
//     and their time per inference; it tunes the most expensive (Options.MaxTasks),
//     drawing tasks for each round in proportion to their share of the kernel time.
//   - Measurement. A Request compiles the model under several assignments (each gives
//     some workloads a candidate, two compiles at a time), runs every executable once on
//     the same seeded random inputs, checks each against the reference assignment's
//     outputs (the defaults), then times the valid ones in interleaved profiled runs;
//     a candidate's speedup is the reference's time of its workload over its own, in
//     the same process and run. On one thread a kernel runs on the thread that launches
//     it, so the child locks its goroutine to its thread and times each launch by the
//     thread's CPU time (CLOCK_THREAD_CPUTIME_ID, vm.Profile.Clock), the median of the
//     repetitions: the time other processes hold the core is left out, which makes the
//     measurements of a loaded machine repeatable (BENCHMARKS.md, "Auto-tuning: the
//     cost model's ranking"). On several threads the workers' time is not the caller's,
//     so kernels are timed by the wall clock, the fastest repetition; Response.Clock and
//     the measurement log say which. Child runs a request in a child process (kiln
//     re-executing itself, ChildMain) with a timeout. A candidate that does not build,
//     computes a wrong result, crashes or hangs the child is recorded invalid (a failed
//     multi-candidate request is measured again candidate by candidate) and the run
//     goes on.
//   - Search. Random points until the cost model has eight measurements; then, a
//     quarter of the time a random point, else the best-predicted of 48 mutations of
//     the task's best three candidates and random points (an evolutionary step scored
//     by the model). The cost model (GBDT: gradient-boosted regression trees, squared
//     loss, trained again after every round) predicts log speedup from the kernel's
//     default loop-IR features (features.go: work, loads, stores, micro-kernel calls,
//     parallel and vector extents, nesting, footprint, loads per store, the extents of
//     the loops around the deepest store) and the candidate's encoding (strategy, log2
//     of each knob, whether it is the default; each strategy's knobs in slots of their
//     own, space.go).
//   - Measurement log. Options.Measurements receives the run's tasks and every measured
//     candidate as JSON lines (measurements.go, ReadMeasurements); the logs recorded on
//     the zoo (testdata/measurements) check the model's ranking of held-out candidates
//     (Spearman, ranking.go).
//   - Records. At the end the tasks' best candidates are measured again, all in one
//     assignment, twice, beside two copies of the defaults and with twice the
//     repetitions; those still Options.MinSpeedup faster become records
//     (compilecache.PutTuning keeps a workload's fastest), which carry the thread
//     count the child's kernels ran on (Response.Threads): compiles apply only the
//     records of their own thread count. During the search a
//     workload's default time is the fastest of the reference's and of every other
//     assignment of the measurement that left it alone, which discounts a disturbed
//     reference (the search's best speedups run high on a loaded machine: each is the
//     best of many noisy ratios; the confirmation is what records trust); on the thread
//     CPU clock, which load does not disturb, it is the mean of those timings.
//   - In-process callers (gated.go). RunGated is Run for a caller that lends the
//     machine while it is idle (kiln serve --tune background): each measurement waits
//     for the caller's Gate and runs under the context it returns; one the gate stops
//     (a request arrived) is thrown away and measured again at the next admission
//     (Gated), and Options.Budget counts measuring time, not the waiting.
//
// Invariants: the tuner never writes a record for a candidate whose outputs were not
// checked against the defaults; a gated run never uses a measurement its gate stopped;
// records carry the fingerprint the child measured on,
// so another target or device never applies them; a child's crash or hang costs its
// candidates, never the run.
package tune
