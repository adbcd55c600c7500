package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// maxNote bounds an error message in the table; the JSON keeps it whole.
const maxNote = 160

// printTable writes the per-model, per-thread-count table and the geometric means of
// the ratios. With more than one level, kiln gets a p50, a ratio to ORT and a compile
// time per level, and the highest level's ratio to the lowest. kiln-generic and
// kiln-opencl add their p50, ratios and compile time.
func printTable(w io.Writer, rep *Report) {
	levels := rep.Config.Levels
	if len(levels) == 0 {
		levels = []int{defaultLevel}
	}
	multi := len(levels) > 1
	hiLo := levelName(levels[len(levels)-1]) + "/" + levelName(levels[0])
	fmt.Fprintln(w)
	if rep.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the table holds what was measured before the stop")
	}
	fmt.Fprintln(w, "p50: median over rounds of each round's p50 latency (*: some rounds failed); spread: (max-min)/median of the round p50s;")
	if !multi {
		fmt.Fprintln(w, "by round: the median over rounds of kiln's p50 over ORT's in the same round;")
	}
	fmt.Fprintln(w, "others: median share of the machine's CPU that other processes took during the runs (above a few % the numbers are disturbed)")
	if multi {
		fmt.Fprintf(w, "On: kiln compiled with -O n; %s: the highest level's p50 over the lowest's\n", hiLo)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"model", "inputs", "threads", "kiln p50 ms", "ORT p50 ms", "kiln/ORT", "by round", "kiln compile s", "spread kiln/ORT"}
	if multi {
		header = header[:3]
		header = append(header, perLevel(levels, func(l int) string { return levelName(l) + " p50 ms" })...)
		header = append(header, "ORT p50 ms")
		header = append(header, perLevel(levels, func(l int) string { return levelName(l) + "/ORT" })...)
		header = append(header, hiLo)
		header = append(header, perLevel(levels, func(l int) string { return levelName(l) + " compile s" })...)
		header = append(header, "spread "+levelNames(levels, "/")+"/ORT")
	}
	generic := slices.Contains(rep.Config.Engines, engineGeneric)
	if generic {
		header = append(header, "generic p50 ms", "generic/ORT", "kiln/generic", "generic compile s")
	}
	opencl := slices.Contains(rep.Config.Engines, engineOpenCL)
	if opencl {
		header = append(header, "opencl p50 ms", "opencl/kiln", "opencl/ORT", "opencl compile s")
	}
	isas := isaEnginesOf(rep.Config.Engines)
	header = append(header, isaHeader(isas)...)
	printRow(tw, append(header, "others", "notes"))
	var geo geoMeans
	for _, m := range rep.Models {
		compile := perLevel(levels, func(l int) string { return compileCell(m, l, multi) })
		if m.Err != "" || len(m.Rows) == 0 {
			cells := []string{m.Name, orDash(m.Label), "-", "-", "-", "-", "-", compile[0], "-"}
			if multi {
				cells = append(cells[:3], dashes(2*len(levels)+2)...)
				cells = append(append(cells, compile...), "-")
			}
			if generic {
				cells = append(cells, dashes(4)...)
			}
			if opencl {
				cells = append(cells, dashes(4)...)
			}
			cells = append(cells, dashes(2*len(isas))...)
			printRow(tw, append(cells, "-", note(m.Err)))
			continue
		}
		for _, row := range m.Rows {
			k, o := row.Engines[engineKiln], row.Engines[engineORT]
			kl := perLevelRuns(row, levels)
			others := "-"
			if row.OthersShare >= 0 {
				others = fmt.Sprintf("%.0f%%", 100*row.OthersShare)
			}
			var cells []string
			if !multi {
				geo.add("kiln/ORT", row.Threads, row.Ratio)
				geo.add("kiln/ORT by round", row.Threads, row.RatioByRound)
				cells = []string{m.Name, orDash(m.Label), strconv.Itoa(row.Threads), cell(k), cell(o),
					ratioCell(row.Ratio), ratioCell(row.RatioByRound), compile[0], spread(k) + "/" + spread(o)}
			} else {
				cells = []string{m.Name, orDash(m.Label), strconv.Itoa(row.Threads)}
				var ratios, spreads []string
				for i, l := range levels {
					r := row.levelRatio(l)
					geo.add("kiln "+levelName(l)+"/ORT", row.Threads, r)
					cells = append(cells, cell(kl[i]))
					ratios = append(ratios, ratioCell(r))
					spreads = append(spreads, spread(kl[i]))
				}
				geo.add("kiln "+hiLo, row.Threads, row.RatioHighLow)
				cells = append(append(cells, cell(o)), ratios...)
				cells = append(append(cells, ratioCell(row.RatioHighLow)), compile...)
				cells = append(cells, strings.Join(spreads, "/")+"/"+spread(o))
			}
			if generic {
				g := row.Engines[engineGeneric]
				geo.add("generic/ORT", row.Threads, ratio(g, o))
				geo.add("kiln/generic", row.Threads, ratio(k, g))
				gc := "-"
				if m.GenericS > 0 {
					gc = fmt.Sprintf("%.2f", m.GenericS)
				}
				cells = append(cells, cell(g), ratioCell(ratio(g, o)), ratioCell(ratio(k, g)), gc)
			}
			if opencl {
				c := row.Engines[engineOpenCL]
				geo.add("opencl/kiln", row.Threads, ratio(c, k))
				geo.add("opencl/ORT", row.Threads, ratio(c, o))
				cc := "-"
				if m.OpenCLS > 0 {
					cc = fmt.Sprintf("%.2f", m.OpenCLS)
				}
				cells = append(cells, cell(c), ratioCell(ratio(c, k)), ratioCell(ratio(c, o)), cc)
			}
			cells = append(cells, isaColumns(isas, row, &geo)...)
			notes := append(kilnNotes(m, levels, kl), isaNotes(isas, row)...)
			if g := row.Engines[engineGeneric]; generic && g != nil && g.Err != "" {
				notes = append(notes, "generic: "+g.Err)
			} else if generic && m.GenericErr != "" {
				notes = append(notes, "generic: "+m.GenericErr)
			}
			if c := row.Engines[engineOpenCL]; opencl && c != nil && c.Err != "" {
				notes = append(notes, "opencl: "+c.Err)
			} else if opencl && m.OpenCLErr != "" {
				notes = append(notes, "opencl: "+m.OpenCLErr)
			}
			if o != nil && o.Err != "" {
				notes = append(notes, "ort: "+o.Err)
			}
			printRow(tw, append(cells, others, note(strings.Join(notes, "; "))))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "load average at the start: %s; at the end: %s\n", orDash(rep.Machine.LoadStart), orDash(rep.Machine.LoadEnd))
	geo.print(w, rep.Config.Threads)
}

// printRow writes one tab-separated table line.
func printRow(w io.Writer, cells []string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// perLevel maps f over levels.
func perLevel(levels []int, f func(l int) string) []string {
	out := make([]string, len(levels))
	for i, l := range levels {
		out[i] = f(l)
	}
	return out
}

// dashes returns n "-" cells.
func dashes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "-"
	}
	return out
}

// perLevelRuns returns kiln's runs at each level of the row (nil where absent).
func perLevelRuns(row *Row, levels []int) []*EngineRuns {
	out := make([]*EngineRuns, len(levels))
	for i, l := range levels {
		out[i] = row.Engines[kilnKey(l, levels)]
	}
	return out
}

// levelRatio is the row's ratio of kiln at level l to ORT (0: none).
func (row *Row) levelRatio(l int) float64 {
	for _, lr := range row.Levels {
		if lr.Level == l {
			return lr.Ratio
		}
	}
	return 0
}

// compileCell formats the compile time at level l; one level shows CompileS as before
// levels existed.
func compileCell(m *ModelReport, l int, multi bool) string {
	s, e := m.CompileS, m.CompileErr
	if multi {
		s, e = 0, ""
		for _, c := range m.Compiles {
			if c.Level == l {
				s, e = c.S, c.Err
			}
		}
	}
	switch {
	case e != "":
		return "error"
	case s > 0:
		return fmt.Sprintf("%.2f", s)
	}
	return "-"
}

// kilnNotes returns kiln's failures on a row: the compile's or else the runs', per level
// ("kiln O0: ...") with several levels, once as "kiln: ..." when every level failed alike.
func kilnNotes(m *ModelReport, levels []int, kl []*EngineRuns) []string {
	if len(levels) == 1 {
		switch {
		case m.CompileErr != "":
			return []string{"kiln: " + m.CompileErr}
		case kl[0] != nil && kl[0].Err != "":
			return []string{"kiln: " + kl[0].Err}
		}
		return nil
	}
	var notes, msgs []string
	for i, l := range levels {
		msg := ""
		for _, c := range m.Compiles {
			if c.Level == l && c.Err != "" {
				msg = c.Err
			}
		}
		if msg == "" && kl[i] != nil {
			msg = kl[i].Err
		}
		if msg != "" {
			msgs = append(msgs, msg)
			notes = append(notes, "kiln "+levelName(l)+": "+msg)
		}
	}
	if len(msgs) == len(levels) && len(dedup(msgs)) == 1 {
		return []string{"kiln: " + msgs[0]}
	}
	return notes
}

// ratioCell formats a ratio, "-" for none.
func ratioCell(r float64) string {
	if r > 0 {
		return fmt.Sprintf("%.2f", r)
	}
	return "-"
}

// geoMeans accumulates the logarithms of named ratios per thread count.
type geoMeans struct {
	names []string // in first-seen order
	sum   map[geoKey]float64
	count map[geoKey]int
}

type geoKey struct {
	name    string
	threads int
}

// add counts ratio r (when positive) under name at threads.
func (g *geoMeans) add(name string, threads int, r float64) {
	if !(r > 0) {
		return
	}
	if g.sum == nil {
		g.sum, g.count = map[geoKey]float64{}, map[geoKey]int{}
	}
	if !slices.Contains(g.names, name) {
		g.names = append(g.names, name)
	}
	k := geoKey{name, threads}
	g.sum[k] += math.Log(r)
	g.count[k]++
}

// print writes one line per thread count and ratio.
func (g *geoMeans) print(w io.Writer, threads []int) {
	for _, t := range threads {
		for _, name := range g.names {
			if k := (geoKey{name, t}); g.count[k] > 0 {
				fmt.Fprintf(w, "geometric mean %s at %d thread(s): %.2f over %d model(s)\n",
					name, t, math.Exp(g.sum[k]/float64(g.count[k])), g.count[k])
			}
		}
	}
}

// cell formats an engine's median p50 for the table.
func cell(er *EngineRuns) string {
	switch {
	case er == nil:
		return "-"
	case er.MedianP50 > 0 && er.Err != "":
		return fmt.Sprintf("%.3f*", er.MedianP50) // some rounds ran before the failure
	case er.MedianP50 > 0:
		return fmt.Sprintf("%.3f", er.MedianP50)
	case er.Err != "":
		return "error"
	}
	return "-"
}

// spread formats (max-min)/median of an engine's round p50s as a percentage.
func spread(er *EngineRuns) string {
	if er == nil || !(er.MedianP50 > 0) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*(er.MaxP50-er.MinP50)/er.MedianP50)
}

// note shortens an error message to one table cell.
func note(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxNote {
		return s[:maxNote] + "..."
	}
	return s
}

// writeJSON writes the report, indented, to path.
func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
