package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// variant is one thing a round runs: ORT, or kiln at one graph optimization level.
type variant struct {
	key    string // its Row.Engines key
	label  string // its name in progress lines and errors
	engine string // engineKiln or engineORT
	level  int    // kiln's level
}

// variants lists what each round runs, in order: --engines, with kiln expanded into one
// variant per level, ascending.
func (d *driver) variants() []variant {
	var vs []variant
	for _, e := range d.cfg.Engines {
		if e == engineGeneric {
			vs = append(vs, variant{key: e, label: e, engine: engineKiln, level: genericLevel})
			continue
		}
		if e == engineOpenCL {
			vs = append(vs, variant{key: e, label: e, engine: engineKiln, level: openclLevel})
			continue
		}
		if isa, ok := isaEngine(e); ok {
			vs = append(vs, variant{key: e, label: e, engine: engineKiln, level: isaLevel(isa)})
			continue
		}
		if e != engineKiln {
			vs = append(vs, variant{key: e, label: e, engine: e})
			continue
		}
		for _, l := range d.cfg.Levels {
			v := variant{key: kilnKey(l, d.cfg.Levels), label: e, engine: e, level: l}
			if len(d.cfg.Levels) > 1 {
				v.label = "kiln-" + levelName(l)
			}
			vs = append(vs, v)
		}
	}
	return vs
}

// kilnKey is the Row.Engines key of kiln at level l: "kiln" at the highest of levels,
// "kiln-O<l>" below it.
func kilnKey(l int, levels []int) string {
	if len(levels) == 0 || l >= slices.Max(levels) {
		return engineKiln
	}
	return "kiln-" + levelName(l)
}

// Pseudo levels: keys of the per-level maps for kiln's executables that are not one
// graph optimization level on the CPU.
const (
	// genericLevel is the generic executable: the highest level with the symbolic dims
	// left free.
	genericLevel = -1
	// openclLevel is the OpenCL executable: the highest level, the data set's shapes,
	// --target opencl.
	openclLevel = -2
)

// compileLevels compiles the model once per level into work, recording each compile's
// time or failure; the highest level's also goes to CompileS and CompileErr. With the
// kiln-generic engine the generic executable is compiled too (its time in GenericS),
// with kiln-opencl the OpenCL one (its time in OpenCLS).
func (d *driver) compileLevels(ctx context.Context, mc *modelCase, work string) {
	mr := mc.rep
	if d.uses(engineOpenCL) {
		switch {
		case d.kilnErr != nil:
			mc.kilnErrs[openclLevel] = d.kilnErr
		default:
			file := filepath.Join(work, "model-opencl.kiln")
			secs, err := d.compile(ctx, mr, file, openclLevel)
			if err != nil {
				mc.kilnErrs[openclLevel] = err
				mr.OpenCLErr = err.Error()
				d.logf("%s: kiln compile --target opencl: %v", mr.Name, err)
			} else {
				mc.kilnFiles[openclLevel], mr.OpenCLS = file, secs
				d.logf("%s: kiln compile --target opencl %.2f s", mr.Name, secs)
			}
		}
	}
	if d.uses(engineGeneric) {
		switch {
		case d.kilnErr != nil:
			mc.kilnErrs[genericLevel] = d.kilnErr
		default:
			file := filepath.Join(work, "model-generic.kiln")
			secs, err := d.compile(ctx, mr, file, genericLevel)
			if err != nil {
				mc.kilnErrs[genericLevel] = err
				mr.GenericErr = err.Error()
				d.logf("%s: kiln compile (generic): %v", mr.Name, err)
			} else {
				mc.kilnFiles[genericLevel], mr.GenericS = file, secs
				d.logf("%s: kiln compile (generic) %.2f s", mr.Name, secs)
			}
		}
	}
	d.compileISAs(ctx, mc, work)
	if !d.uses(engineKiln) {
		return
	}
	for _, l := range d.cfg.Levels {
		if d.kilnErr != nil {
			mc.kilnErrs[l] = d.kilnErr
			continue
		}
		tag := "kiln compile"
		if len(d.cfg.Levels) > 1 {
			tag = fmt.Sprintf("kiln compile -O %d", l)
		}
		c := &Compile{Level: l}
		mr.Compiles = append(mr.Compiles, c)
		file := filepath.Join(work, fmt.Sprintf("model-O%d.kiln", l))
		secs, err := d.compile(ctx, mr, file, l)
		if err != nil {
			mc.kilnErrs[l] = err
			c.Err = err.Error()
			d.logf("%s: %s: %v", mr.Name, tag, err)
			continue
		}
		mc.kilnFiles[l] = file
		c.S = secs
		d.logf("%s: %s %.2f s", mr.Name, tag, secs)
	}
	if n := len(mr.Compiles); n > 0 {
		mr.CompileS, mr.CompileErr = mr.Compiles[n-1].S, mr.Compiles[n-1].Err
	}
}

// sumLevels fills the row's ratios from its engines' medians: kiln (its highest level)
// over ORT, each level over ORT and, with two levels or more, the highest over the
// lowest.
func (row *Row) sumLevels(levels []int) {
	o := row.Engines[engineORT]
	row.Ratio = ratio(row.Engines[engineKiln], o)
	row.RatioByRound = roundRatio(row.Engines[engineKiln], o)
	row.Levels = nil
	for _, l := range levels {
		key := kilnKey(l, levels)
		k := row.Engines[key]
		if k == nil {
			continue
		}
		row.Levels = append(row.Levels, &LevelResult{Level: l, Engine: key, MedianP50: k.MedianP50, Ratio: ratio(k, o)})
	}
	row.RatioHighLow = 0
	if len(levels) > 1 {
		row.RatioHighLow = ratio(row.Engines[kilnKey(levels[len(levels)-1], levels)], row.Engines[kilnKey(levels[0], levels)])
	}
}

// ratio is a's median p50 over b's; 0 when either is missing.
func ratio(a, b *EngineRuns) float64 {
	if a == nil || b == nil || !(a.MedianP50 > 0) || !(b.MedianP50 > 0) {
		return 0
	}
	return a.MedianP50 / b.MedianP50
}

// roundRatio is the median over the rounds where both a and b succeeded of a's p50 over
// b's in that round; 0 when there is no such round.
func roundRatio(a, b *EngineRuns) float64 {
	if a == nil || b == nil {
		return 0
	}
	bp := map[int]float64{}
	for _, r := range b.Runs {
		if r.Result != nil && r.Err == "" && r.Result.P50 > 0 {
			bp[r.Round] = r.Result.P50
		}
	}
	var rs []float64
	for _, r := range a.Runs {
		if d, ok := bp[r.Round]; ok && r.Result != nil && r.Err == "" && r.Result.P50 > 0 {
			rs = append(rs, r.Result.P50/d)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	return median(rs)
}

// levelName is level l as the table and progress lines name it: "O3".
func levelName(l int) string { return fmt.Sprintf("O%d", l) }

// levelNames joins the names of levels with sep.
func levelNames(levels []int, sep string) string {
	var s []string
	for _, l := range levels {
		s = append(s, levelName(l))
	}
	return strings.Join(s, sep)
}
