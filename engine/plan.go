package engine

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/compilecache"
)

// KindPlan is the journal entry beside an executable that keeps its compile's Stats
// (the plan `kiln inspect --plan` prints: kernel launches, strategies, fused groups,
// memory), under the executable's key material. The executable itself does not carry
// the strategies and anchors its kernels were built from.
const KindPlan compilecache.Kind = "plan"

// ErrNoPlan: the journal has the executable but not its plan (the plan entry was
// evicted or the journal refused it); compiling again (without the journal) makes one.
var ErrNoPlan = errors.New("no stored plan")

func planMaterial(exe compilecache.Material) compilecache.Material {
	return compilecache.Material{Kind: KindPlan, Parts: exe.Parts}
}

// keepPlan stores a compile's statistics beside its executable. The plan is a report:
// a journal that refuses it (read-only, full) loses the report, never the executable.
func (e *Engine) keepPlan(m *Model, exe compilecache.Material, st *Stats) {
	b, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("BUG: engine.Stats does not marshal: %v", err))
	}
	_ = e.cfg.Journal.Put(planMaterial(exe), m.Name+" (plan)", b, 0)
}

// Plan returns the plan of an executable the engine obtained: its compile's statistics,
// or, for one taken from the journal, those stored beside it (ErrNoPlan when absent).
func (e *Engine) Plan(b *Built) (*Stats, error) {
	if b.Stats != nil {
		return b.Stats, nil
	}
	if e.cfg.Journal == nil || b.Material.Kind != compilecache.KindExecutable {
		return nil, fmt.Errorf("%w: the executable was not compiled here and no journal holds it", ErrNoPlan)
	}
	blob, err := e.cfg.Journal.Get(planMaterial(b.Material))
	if err != nil {
		return nil, fmt.Errorf("%w for journal entry %s: %v", ErrNoPlan, b.Key.Short(), err)
	}
	var st Stats
	if err := json.Unmarshal(append(blob.Head(), blob.Tail()...), &st); err != nil {
		return nil, fmt.Errorf("%w for journal entry %s: the plan does not decode: %v", ErrNoPlan, b.Key.Short(), err)
	}
	return &st, nil
}
