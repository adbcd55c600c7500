package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// profileRow writes where each engine's time goes for one model and thread count into
// --profile's folder, after the timed rounds (the profilers cost the timings nothing):
// NAME-tT-LABEL.txt, `kiln bench --profile`'s table of kernels by time, for each kiln
// variant, and NAME-tT-ort.json, ONNX Runtime's kernel time by op type and by node
// (bench.js --profile). iters are the variant's timed iterations of the rounds.
func (d *driver) profileRow(ctx context.Context, mc *modelCase, threads int, row *Row) {
	if d.cfg.ProfileDir == "" {
		return
	}
	if err := os.MkdirAll(d.cfg.ProfileDir, 0o755); err != nil {
		d.logf("profile: %v", err)
		return
	}
	name := mc.rep.Name
	for _, v := range d.variants() {
		er := row.Engines[v.key]
		if er == nil || er.Err != "" {
			continue
		}
		base := filepath.Join(d.cfg.ProfileDir, fmt.Sprintf("%s-t%d-%s", name, threads, v.label))
		rctx, cancel := context.WithTimeout(ctx, d.cfg.RunTimeout)
		cmd := d.benchCmd(rctx, v, mc, threads, er.Iters, er.Warmup)
		file := base + ".txt"
		if v.engine == engineORT {
			file = base + ".json"
			cmd.Args = append(cmd.Args, "--profile", file)
		} else {
			// the table comes before the JSON result line
			cmd.Args = append(cmd.Args, "--profile", "-q")
		}
		stdout, stderr, _, err := execute(rctx, cmd, d.root)
		cancel()
		if err != nil {
			d.logf("%s t=%d %s profile: %v: %s", name, threads, v.label, err, stderr)
			continue
		}
		if v.engine != engineORT {
			if err := os.WriteFile(file, stdout, 0o644); err != nil {
				d.logf("profile: %v", err)
				continue
			}
		}
		d.logf("%s t=%d %s profile: %s", name, threads, v.label, file)
	}
}

// profileFlagDoc documents --profile.
const profileFlagDoc = "after each model's rounds, write per-kernel (kiln bench --profile) and per-op (ONNX Runtime's profiler) time to `DIR`"
