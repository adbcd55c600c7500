package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// maxNote bounds an error message in the table; the JSON keeps it whole.
const maxNote = 160

// printTable writes the per-model, per-thread-count table and the geometric means of
// the ratios.
func printTable(w io.Writer, rep *Report) {
	fmt.Fprintln(w)
	if rep.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the table holds what was measured before the stop")
	}
	fmt.Fprintln(w, "p50: median over rounds of each round's p50 latency (*: some rounds failed); spread: (max-min)/median of the round p50s;")
	fmt.Fprintln(w, "others: median share of the machine's CPU that other processes took during the runs (above a few % the numbers are disturbed)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tinputs\tthreads\tkiln p50 ms\tORT p50 ms\tkiln/ORT\tkiln compile s\tspread kiln/ORT\tothers\tnotes")
	logSum := map[int]float64{}
	count := map[int]int{}
	for _, m := range rep.Models {
		compile := "-"
		switch {
		case m.CompileErr != "":
			compile = "error"
		case m.CompileS > 0:
			compile = fmt.Sprintf("%.2f", m.CompileS)
		}
		if m.Err != "" || len(m.Rows) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t%s\t-\t-\t%s\n", m.Name, orDash(m.Label), compile, note(m.Err))
			continue
		}
		for _, row := range m.Rows {
			k, o := row.Engines[engineKiln], row.Engines[engineORT]
			var notes []string
			if m.CompileErr != "" {
				notes = append(notes, "kiln: "+m.CompileErr)
			} else if k != nil && k.Err != "" {
				notes = append(notes, "kiln: "+k.Err)
			}
			if o != nil && o.Err != "" {
				notes = append(notes, "ort: "+o.Err)
			}
			ratio := "-"
			if row.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", row.Ratio)
				logSum[row.Threads] += math.Log(row.Ratio)
				count[row.Threads]++
			}
			others := "-"
			if row.OthersShare >= 0 {
				others = fmt.Sprintf("%.0f%%", 100*row.OthersShare)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\n",
				m.Name, orDash(m.Label), row.Threads, cell(k), cell(o), ratio, compile,
				spread(k), spread(o), others, note(strings.Join(notes, "; ")))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "load average at the start: %s; at the end: %s\n", orDash(rep.Machine.LoadStart), orDash(rep.Machine.LoadEnd))
	for _, t := range rep.Config.Threads {
		if count[t] > 0 {
			fmt.Fprintf(w, "geometric mean kiln/ORT at %d thread(s): %.2f over %d model(s)\n",
				t, math.Exp(logSum[t]/float64(count[t])), count[t])
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
