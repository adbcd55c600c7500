package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ISA-capped kiln engines: kiln compiled and run with KILN_CPU_ISA set to one level, at
// the highest graph optimization level for the data set's shapes. Naming several in one
// run (--engines kiln,kiln@avx2,kiln@generic,ort) times each cap side by side with the
// uncapped kiln and ORT, alternating in every round.
const isaEnginePrefix = "kiln@"

// isaLevels are the caps KILN_CPU_ISA takes, widest first; an ISA engine's pseudo level
// is isaLevelBase minus the cap's index.
var isaLevels = []string{"avx512", "avx2", "sse4", "generic"}

const isaLevelBase = -3

// isaEngine reports the cap an engine name asks for, and whether it is an ISA engine.
func isaEngine(e string) (string, bool) {
	isa, ok := strings.CutPrefix(e, isaEnginePrefix)
	return isa, ok && slices.Contains(isaLevels, isa)
}

// isaLevel is the pseudo level (the key of the per-level maps) of an ISA engine.
func isaLevel(isa string) int { return isaLevelBase - slices.Index(isaLevels, isa) }

// levelISA is the cap of a pseudo level, or "" when l is not an ISA engine's.
func levelISA(l int) string {
	i := isaLevelBase - l
	if i < 0 || i >= len(isaLevels) {
		return ""
	}
	return isaLevels[i]
}

// isaEngines lists the run's ISA engines in --engines order.
func (d *driver) isaEngines() []string { return isaEnginesOf(d.cfg.Engines) }

// isaEnginesOf lists the ISA engines among engines, in order.
func isaEnginesOf(engines []string) []string {
	var es []string
	for _, e := range engines {
		if _, ok := isaEngine(e); ok {
			es = append(es, e)
		}
	}
	return es
}

// withISA sets KILN_CPU_ISA on cmd when level is an ISA engine's (replacing a value the
// environment already has), and returns cmd.
func withISA(cmd *exec.Cmd, level int) *exec.Cmd {
	isa := levelISA(level)
	if isa == "" {
		return cmd
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "KILN_CPU_ISA=") })
	cmd.Env = append(env, "KILN_CPU_ISA="+isa)
	return cmd
}

// compileISAs compiles the model once per ISA engine of the run, each under its cap.
func (d *driver) compileISAs(ctx context.Context, mc *modelCase, work string) {
	mr := mc.rep
	for _, e := range d.isaEngines() {
		isa, _ := isaEngine(e)
		l := isaLevel(isa)
		if d.kilnErr != nil {
			mc.kilnErrs[l] = d.kilnErr
			continue
		}
		file := filepath.Join(work, "model-"+isa+".kiln")
		secs, err := d.compile(ctx, mr, file, l)
		if err != nil {
			mc.kilnErrs[l] = err
			d.logf("%s: KILN_CPU_ISA=%s kiln compile: %v", mr.Name, isa, err)
			continue
		}
		mc.kilnFiles[l] = file
		if mr.ISACompileS == nil {
			mr.ISACompileS = map[string]float64{}
		}
		mr.ISACompileS[isa] = secs
		d.logf("%s: KILN_CPU_ISA=%s kiln compile %.2f s", mr.Name, isa, secs)
	}
}

// isaColumns are the report's cells for the ISA engines of one row: each cap's p50 and
// its ratio to ORT, also added to the geometric means.
func isaColumns(engines []string, row *Row, geo *geoMeans) []string {
	o := row.Engines[engineORT]
	var cells []string
	for _, e := range engines {
		er := row.Engines[e]
		geo.add(e+"/ORT", row.Threads, ratio(er, o))
		cells = append(cells, cell(er), ratioCell(ratio(er, o)))
	}
	return cells
}

// isaHeader is the report's header cells for the ISA engines.
func isaHeader(engines []string) []string {
	var h []string
	for _, e := range engines {
		h = append(h, e+" p50 ms", e+"/ORT")
	}
	return h
}

// isaNotes are the failures of a row's ISA engines.
func isaNotes(engines []string, row *Row) []string {
	var notes []string
	for _, e := range engines {
		if er := row.Engines[e]; er != nil && er.Err != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", e, er.Err))
		}
	}
	return notes
}
