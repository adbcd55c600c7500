package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// driver runs the benchmark.
type driver struct {
	cfg  Config
	root string
	work string
	log  io.Writer

	kiln    string
	kilnErr error // kiln cannot run at all (build failed)
	ortErr  error // ORT cannot run at all (not installed)
}

// modelCase is one model being measured.
type modelCase struct {
	rep       *ModelReport
	kilnFiles map[int]string // the compiled model per level
	kilnErrs  map[int]error  // why kiln cannot run this model at a level (compile failed)
	ortInputs string
	ortErr    error // ORT cannot run this model (inputs not converted)
}

// uses reports whether the run includes engine e.
func (d *driver) uses(e string) bool { return slices.Contains(d.cfg.Engines, e) }

// usesKiln reports whether the run includes any kiln engine.
func (d *driver) usesKiln() bool {
	return d.uses(engineKiln) || d.uses(engineGeneric) || d.uses(engineOpenCL) || len(d.isaEngines()) > 0
}

// logf writes a progress line to the log.
func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(d.log, format+"\n", args...)
}

// run measures every model and returns the report; it prints the machine block first.
func (d *driver) run(ctx context.Context, stdout io.Writer) *Report {
	rep := &Report{Config: d.cfg}
	cpu, isa := cpuInfo()
	rep.Machine = Machine{
		CPU: cpu, ISA: isa, Cores: runtime.NumCPU(), Go: runtime.Version(),
		Kernel: readTrim("/proc/sys/kernel/osrelease"), LoadStart: loadAvg(),
		Start: time.Now().Format(time.RFC3339),
	}
	rep.Machine.Commit = firstLine(ctx, d.root, "git", "rev-parse", "--short=12", "HEAD")
	if d.uses(engineORT) {
		rep.Machine.Node = firstLine(ctx, d.root, d.cfg.Node, "--version")
		if rep.Machine.Node == "" {
			d.ortErr = fmt.Errorf("cannot run node (%s)", d.cfg.Node)
		}
		v, err := ortVersion(d.cfg.ORTDir)
		if err != nil && d.ortErr == nil {
			d.ortErr = err
		}
		rep.Machine.ORT = v
	}
	if d.usesKiln() {
		d.prepareKiln(ctx)
		if d.kilnErr == nil {
			rep.Machine.Kiln = firstLine(ctx, d.root, d.kiln, "version")
		}
	}
	rep.Machine.print(stdout)
	levels := ""
	if d.uses(engineKiln) && !slices.Equal(d.cfg.Levels, []int{defaultLevel}) {
		levels = "; kiln at levels " + levelNames(d.cfg.Levels, ",") + " (kiln compile -O, each round running all)"
	}
	fmt.Fprintf(stdout, "models:  %s; threads %v; %d rounds; engines %s (in this order in round 1, rotated by one each round after)%s\n\n",
		strings.Join(d.cfg.Models, ","), d.cfg.Threads, d.cfg.Rounds, strings.Join(d.cfg.Engines, ","), levels)
	if d.kilnErr != nil {
		d.logf("kiln: %v", d.kilnErr)
	}
	if d.ortErr != nil {
		d.logf("ort: %v", d.ortErr)
	}

	for _, name := range d.cfg.Models {
		if ctx.Err() != nil {
			break
		}
		rep.Models = append(rep.Models, d.runModel(ctx, name))
	}
	rep.Interrupted = ctx.Err() != nil
	rep.Machine.LoadEnd = loadAvg()
	return rep
}

// prepareKiln sets d.kiln: the --kiln binary, or one built from ./cmd/kiln.
func (d *driver) prepareKiln(ctx context.Context) {
	if d.cfg.Kiln != "" {
		if _, err := os.Stat(d.cfg.Kiln); err != nil {
			d.kilnErr = fmt.Errorf("--kiln: %w", err)
		}
		d.kiln = d.cfg.Kiln
		return
	}
	d.kiln = filepath.Join(d.work, "kiln")
	d.logf("building kiln: go build -o %s ./cmd/kiln", d.kiln)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", d.kiln, "./cmd/kiln")
	cmd.Dir = d.root
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		d.kilnErr = fmt.Errorf("go build ./cmd/kiln: %w: %s", err, lastLines(errb.String(), 5))
	}
}

// runModel measures one zoo case at every thread count.
func (d *driver) runModel(ctx context.Context, name string) *ModelReport {
	dir := filepath.Join(d.cfg.Zoo, name)
	mr := &ModelReport{
		Name:    name,
		Model:   filepath.Join(dir, "model.onnx"),
		DataSet: filepath.Join(dir, fmt.Sprintf("test_data_set_%d", d.cfg.Set)),
	}
	mr.Label = readTrim(filepath.Join(mr.DataSet, "label.txt"))
	mc := &modelCase{rep: mr, kilnFiles: map[int]string{}, kilnErrs: map[int]error{}, ortErr: d.ortErr}
	d.logf("== %s (%s)", name, orDash(mr.Label))
	for _, p := range []string{mr.Model, filepath.Join(mr.DataSet, "input_0.pb")} {
		if _, err := os.Stat(p); err != nil {
			mr.Err = fmt.Sprintf("missing %s", p)
			d.logf("%s: %s", name, mr.Err)
			return mr
		}
	}
	work := filepath.Join(d.work, name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		mr.Err = err.Error()
		return mr
	}

	if d.uses(engineORT) && mc.ortErr == nil {
		mc.ortInputs = filepath.Join(work, "ort_inputs")
		if _, err := writeORTInputs(mr.DataSet, mc.ortInputs); err != nil {
			mc.ortErr = err
			d.logf("%s: ort: %v", name, err)
		}
	}
	if d.usesKiln() {
		d.compileLevels(ctx, mc, work)
	}

	for _, t := range d.cfg.Threads {
		if ctx.Err() != nil {
			break
		}
		mr.Rows = append(mr.Rows, d.runRow(ctx, mc, t))
	}
	return mr
}

// compile runs `kiln compile -O level` once and returns its wall time in seconds.
func (d *driver) compile(ctx context.Context, mr *ModelReport, out string, level int) (float64, error) {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CompileTimeout)
	defer cancel()
	args := []string{"compile", mr.Model, "-o", out, "--input-dir", mr.DataSet, "-O", strconv.Itoa(level)}
	switch level {
	case genericLevel: // symbolic dims free: no inputs to bind them
		args = []string{"compile", mr.Model, "-o", out, "-O", strconv.Itoa(slices.Max(d.cfg.Levels))}
	case openclLevel:
		args = []string{"compile", mr.Model, "-o", out, "--input-dir", mr.DataSet, "-O", strconv.Itoa(slices.Max(d.cfg.Levels)), "--target", "opencl"}
	}
	if levelISA(level) != "" { // under the cap, at the highest level
		args = []string{"compile", mr.Model, "-o", out, "--input-dir", mr.DataSet, "-O", strconv.Itoa(slices.Max(d.cfg.Levels))}
	}
	cmd := withISA(exec.CommandContext(cctx, d.kiln, args...), level)
	_, _, ps, err := execute(cctx, cmd, d.root)
	if err != nil {
		return 0, fmt.Errorf("kiln compile: %w", err)
	}
	if _, err := os.Stat(out); err != nil {
		return 0, fmt.Errorf("kiln compile exited 0 but wrote no file: %w", err)
	}
	return ps.wall.Seconds(), nil
}

// runRow runs every round of one model at one thread count.
func (d *driver) runRow(ctx context.Context, mc *modelCase, threads int) *Row {
	row := &Row{Threads: threads, Engines: map[string]*EngineRuns{}}
	name := mc.rep.Name
	vs := d.variants()
	for _, v := range vs {
		er := &EngineRuns{Runs: []*Run{}}
		if v.engine == engineKiln && v.level >= 0 {
			er.Level = &v.level
		}
		row.Engines[v.key] = er
		if err := mc.engineErr(v); err != nil {
			er.Err = err.Error()
			continue
		}
		er.Iters = d.cfg.Iters
		if er.Iters == 0 {
			probe := d.benchOnce(ctx, v, mc, threads, probeIters, probeWarmup, 0)
			er.Probe = probe
			if probe.Err != "" {
				er.Err = probe.Err
				d.logf("%s t=%d %s probe: %s", name, threads, v.label, probe.Err)
				continue
			}
			er.Iters = chooseIters(probe.Result.Min, d.cfg.Target) // the min: a probe on a busy machine would ask too few
		}
		er.Warmup = d.cfg.Warmup
		if er.Warmup < 0 {
			er.Warmup = autoWarmup(er.Iters)
		}
	}
	for r := 1; r <= d.cfg.Rounds && ctx.Err() == nil; r++ {
		var line []string
		for _, v := range roundOrder(vs, row, r) {
			er := row.Engines[v.key]
			if er.Err != "" {
				continue
			}
			run := d.benchOnce(ctx, v, mc, threads, er.Iters, er.Warmup, r)
			er.Runs = append(er.Runs, run)
			if run.Err != "" {
				er.Err = run.Err
				line = append(line, fmt.Sprintf("%s FAILED", v.label))
				d.logf("%s t=%d round %d %s: %s", name, threads, r, v.label, run.Err)
				continue
			}
			line = append(line, fmt.Sprintf("%s %.3f ms (%d it)", v.label, run.Result.P50, er.Iters))
		}
		if len(line) > 0 {
			d.logf("%s t=%d round %d/%d: %s", name, threads, r, d.cfg.Rounds, strings.Join(line, ", "))
		}
	}
	d.profileRow(ctx, mc, threads, row)
	for _, er := range row.Engines {
		er.summarize()
	}
	row.sumLevels(d.cfg.Levels)
	row.OthersShare = othersShare(row, runtime.NumCPU())
	return row
}

// roundOrder is the order round r (from 1) runs the variants that have not failed: the
// listed order rotated by r-1, so that each variant runs first, second, ... in turn. On
// the 2-vCPU VMs of BENCHMARKS.md the second of two back-to-back runs of one binary
// measured 3-4% slower (resnet50's kernels, min of 3 rounds); a fixed order would give
// that to the same engine every round.
func roundOrder(vs []variant, row *Row, r int) []variant {
	var active []variant
	for _, v := range vs {
		if row.Engines[v.key].Err == "" {
			active = append(active, v)
		}
	}
	if len(active) == 0 {
		return nil
	}
	k := (r - 1) % len(active)
	return append(active[k:len(active):len(active)], active[:k]...)
}

// othersShare is the median over the row's rounds of the fraction of the machine's CPU
// time (wall time × cores) that others took during a run; -1 when it is not known.
func othersShare(row *Row, cores int) float64 {
	var shares []float64
	for _, er := range row.Engines {
		for _, r := range er.Runs {
			if r.OthersCPUS != nil && r.StealS != nil && r.WallS > 0 {
				shares = append(shares, (*r.OthersCPUS+*r.StealS)/(r.WallS*float64(cores)))
			}
		}
	}
	if len(shares) == 0 {
		return -1
	}
	return median(shares)
}

// engineErr returns why v cannot run this model, or nil.
func (mc *modelCase) engineErr(v variant) error {
	switch v.engine {
	case engineKiln:
		if err := mc.kilnErrs[v.level]; err != nil {
			return err
		}
		if mc.kilnFiles[v.level] == "" && v.level == genericLevel {
			return fmt.Errorf("no generic executable")
		}
		if mc.kilnFiles[v.level] == "" && v.level == openclLevel {
			return fmt.Errorf("no OpenCL executable")
		}
		if isa := levelISA(v.level); mc.kilnFiles[v.level] == "" && isa != "" {
			return fmt.Errorf("no executable under KILN_CPU_ISA=%s", isa)
		}
		if mc.kilnFiles[v.level] == "" {
			return fmt.Errorf("not compiled at -O %d", v.level)
		}
		return nil
	case engineORT:
		return mc.ortErr
	}
	return fmt.Errorf("unknown engine %q", v.engine)
}

// summarize fills the median, min and max of the successful rounds' p50.
func (er *EngineRuns) summarize() {
	var p50s []float64
	for _, r := range er.Runs {
		if r.Result != nil && r.Err == "" {
			p50s = append(p50s, r.Result.P50)
		}
	}
	if len(p50s) == 0 {
		return
	}
	er.MedianP50 = median(p50s)
	er.MinP50 = slices.Min(p50s)
	er.MaxP50 = slices.Max(p50s)
}

// chooseIters returns the timed iterations that make one run last about target at a
// latency of p50 ms, clamped to [minIters, maxIters].
func chooseIters(p50 float64, target time.Duration) int {
	if !(p50 > 0) || math.IsInf(p50, 0) {
		return minIters
	}
	n := math.Ceil(float64(target) / float64(time.Millisecond) / p50)
	return int(min(max(n, minIters), maxIters))
}

// autoWarmup returns the warm-up iterations for a run of iters timed ones.
func autoWarmup(iters int) int { return min(max(iters/10, 3), 100) }

// benchCmd builds the command that benchmarks v on mc.
func (d *driver) benchCmd(ctx context.Context, v variant, mc *modelCase, threads, iters, warmup int) *exec.Cmd {
	num := strconv.Itoa
	switch v.engine {
	case engineKiln:
		args := []string{"bench", mc.kilnFiles[v.level], "--input-dir", mc.rep.DataSet,
			"--threads", num(threads), "--iters", num(iters), "--warmup", num(warmup), "--json"}
		if v.level == openclLevel {
			args = append(args, "--target", "opencl")
		}
		return withISA(exec.CommandContext(ctx, d.kiln, args...), v.level)
	case engineORT:
		cmd := exec.CommandContext(ctx, d.cfg.Node, filepath.Join(d.cfg.ORTDir, "bench.js"),
			"--model", mc.rep.Model, "--inputs", mc.ortInputs,
			"--threads", num(threads), "--iters", num(iters), "--warmup", num(warmup))
		cmd.Env = append(os.Environ(), ortEnv...)
		return cmd
	}
	panic("ortcompare: unknown engine " + v.engine)
}

// benchOnce runs one engine process and decodes its result line.
func (d *driver) benchOnce(ctx context.Context, v variant, mc *modelCase, threads, iters, warmup, round int) *Run {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RunTimeout)
	defer cancel()
	cmd := d.benchCmd(rctx, v, mc, threads, iters, warmup)
	load, _, _ := strings.Cut(loadAvg(), " ")
	stdout, _, ps, err := execute(rctx, cmd, d.root)
	run := &Run{Round: round, WallS: ps.wall.Seconds(), CPUS: ps.cpu, Load: load}
	if ps.ok {
		run.OthersCPUS, run.StealS = &ps.others, &ps.steal
	}
	if err != nil {
		run.Err = fmt.Sprintf("%s bench: %v", v.label, err)
		return run
	}
	res, raw, err := parseResult(stdout, v.engine, iters, threads)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.Result, run.Raw = &res, raw
	return run
}
