package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/compilecache"
)

// KindWorkloads is the journal entry that lists the workloads (the compiler's
// structural kernel keys, which tuning records name) of a model's executable for some
// input shapes, under the executable's key material without its tuning component. An
// executable's key then names the digest of the records of its own kernels only: a
// record for another model's kernel leaves the key, and so the journal entry, as it
// was.
const KindWorkloads compilecache.Kind = "workloads"

// workloadsMaterial is the material of the workload list of the executable exe names.
func workloadsMaterial(exe compilecache.Material) compilecache.Material {
	var parts []compilecache.Component
	for _, p := range exe.Parts {
		if p.Name != "tuning" {
			parts = append(parts, p)
		}
	}
	return compilecache.Material{Kind: KindWorkloads, Parts: parts}
}

// workloadsOf is the sorted, distinct workloads of a compile's kernels.
func workloadsOf(st *Stats) []string {
	var ws []string
	for _, g := range st.Groups {
		if g.Workload != "" {
			ws = append(ws, g.Workload)
		}
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

func encodeWorkloads(ws []string) []byte {
	b, err := json.Marshal(ws)
	if err != nil {
		panic("BUG: a workload list does not marshal: " + err.Error())
	}
	return b
}

// readWorkloads is the workload list in an entry's content.
func readWorkloads(b *compilecache.Blob) ([]string, error) {
	var ws []string
	if err := json.Unmarshal(append(b.Head(), b.Tail()...), &ws); err != nil {
		return nil, fmt.Errorf("the workload list does not decode: %w", err)
	}
	return ws, nil
}

// keepWorkloads stores a compile's workload list beside its executable (a journal that
// refuses it costs a compile of the model when records come, never the executable).
func (e *Engine) keepWorkloads(exe compilecache.Material, st *Stats) {
	_ = e.cfg.Journal.Put(workloadsMaterial(exe), "workloads", encodeWorkloads(workloadsOf(st)), 0)
}

// ofWorkloads keeps the records whose workload is in ws (sorted).
func ofWorkloads(recs []compilecache.TuningRecord, ws []string) []compilecache.TuningRecord {
	var out []compilecache.TuningRecord
	for _, r := range recs {
		if _, ok := slices.BinarySearch(ws, r.Workload); ok {
			out = append(out, r)
		}
	}
	return out
}

// storedWorkloads is the journal's workload list of m's executable for the shapes.
func (e *Engine) storedWorkloads(m *Model, shapes map[string][]int64) ([]string, bool) {
	b, err := e.cfg.Journal.Get(workloadsMaterial(e.material(m, shapes, nil)))
	if err != nil {
		return nil, false
	}
	ws, err := readWorkloads(b)
	return ws, err == nil
}

// modelRecords narrows recs (the records the engine may apply) to those of m's
// kernels, through the journal's workload list of m's executable. Without the list, a
// compiling engine compiles with all of recs (a record of a kernel the model lacks is
// never consulted, so the executable is the same), under the build lock of the list's
// entry: it publishes the executable under its narrowed key, then the list, so a
// process that finds the list finds the executable; pre is that compile. A serve-only
// engine without the list keys with all of recs (and so reports the entry not
// prebuilt: a prebuild stores the list).
func (e *Engine) modelRecords(ctx context.Context, m *Model, shapes map[string][]int64, recs []compilecache.TuningRecord,
	compile func(context.Context, *Tuning) (*Compiled, error)) (narrowed []compilecache.TuningRecord, pre *Compiled, err error) {
	if len(recs) == 0 {
		return nil, nil, nil
	}
	if ws, ok := e.storedWorkloads(m, shapes); ok {
		return ofWorkloads(recs, ws), nil, nil
	}
	if e.cfg.Compiler == nil {
		return recs, nil, nil
	}
	j := e.cfg.Journal
	wm := workloadsMaterial(e.material(m, shapes, nil))
	r, err := j.Do(ctx, wm, m.Name+" (workloads)", func(ctx context.Context) ([]byte, int, error) {
		c, err := compile(ctx, tuningOf(recs))
		if err != nil {
			return nil, 0, err
		}
		pre = c
		ws := workloadsOf(&c.Stats)
		exe := e.material(m, shapes, ofWorkloads(recs, ws))
		blob, err := c.Exe.MarshalBinary()
		if err != nil {
			return nil, 0, err
		}
		// a journal that refuses the executable gets it from the caller's own Do
		_ = j.Put(exe, m.Name, blob, dataOffset(blob))
		e.keepPlan(m, exe, &c.Stats)
		return encodeWorkloads(ws), 0, nil
	})
	if err != nil {
		return nil, nil, err
	}
	ws, err := readWorkloads(r.Blob)
	if err != nil {
		j.Invalidate(wm, err.Error())
		return recs, pre, nil
	}
	return ofWorkloads(recs, ws), pre, nil
}
