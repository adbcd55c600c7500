package kernels

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
)

// ErrBadChoice: a tuning choice this table cannot build (an unknown strategy, one that
// does not apply to the node, an unknown knob or an illegal value). The compiler then
// builds the default.
var ErrBadChoice = errors.New("tuning choice not applicable")

// Knob is one tunable decision of a strategy: its legal values and the value of the
// strategy's default rule.
type Knob struct {
	Name    string
	Values  []int64
	Default int64
}

// Knobs is an assignment of values to a strategy's knobs, by name.
type Knobs map[string]int64

// String is the canonical form, sorted by name: "KC=128,MC=4" ("" for none).
func (k Knobs) String() string {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + strconv.FormatInt(k[n], 10)
	}
	return strings.Join(parts, ",")
}

// ParseKnobs reads the canonical form.
func ParseKnobs(s string) (Knobs, error) {
	k := Knobs{}
	if s == "" {
		return k, nil
	}
	for _, p := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(p, "=")
		v, err := strconv.ParseInt(val, 10, 64)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%w: knob %q: want name=integer", ErrBadChoice, p)
		}
		if _, dup := k[name]; dup {
			return nil, fmt.Errorf("%w: knob %s given twice", ErrBadChoice, name)
		}
		k[name] = v
	}
	return k, nil
}

// Resolve checks an assignment against the declared knobs and completes it with their
// defaults.
func Resolve(decl []Knob, k Knobs) (Knobs, error) {
	out := Knobs{}
	for _, d := range decl {
		out[d.Name] = d.Default
	}
	for name, v := range k {
		i := slices.IndexFunc(decl, func(d Knob) bool { return d.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: no knob %s", ErrBadChoice, name)
		}
		if !slices.Contains(decl[i].Values, v) {
			return nil, fmt.Errorf("%w: knob %s=%d: legal values %v", ErrBadChoice, name, v, decl[i].Values)
		}
		out[name] = v
	}
	return out, nil
}

// Choice is a strategy and a knob assignment for one kernel: a tuning candidate.
type Choice struct {
	Strategy string
	Knobs    Knobs
}

func (c Choice) String() string {
	if len(c.Knobs) == 0 {
		return c.Strategy
	}
	return c.Strategy + "{" + c.Knobs.String() + "}"
}

// Option is a strategy that can build a node, with its knobs: one part of the node's
// search space (the first Option is the default's strategy).
type Option struct {
	Strategy string
	Knobs    []Knob
}

// candidates are the strategies tried for n, in order, the fallback last.
func (s *Strategies) candidates(n *graph.Node) []Strategy {
	return append(append([]Strategy{}, s.table[n.Op]...), s.fallback)
}

// Then is a copy of the table with the given strategies tried after op's own, before
// the fallback.
func (s *Strategies) Then(op graph.Op, st ...Strategy) *Strategies {
	out := &Strategies{fallback: s.fallback, table: s.table}
	out.table[op] = append(append([]Strategy{}, s.table[op]...), st...)
	return out
}

// Fallback is the table's rule for every op without a strategy of its own.
func (s *Strategies) Fallback() Strategy { return s.fallback }

// Space lists the strategies that build n (with the epilogues, when given) and their
// knobs, in the table's order.
func (s *Strategies) Space(n *graph.Node, in []Input, epi []Epilogue, t target.Target) []Option {
	var out []Option
	for _, st := range s.candidates(n) {
		if slices.ContainsFunc(out, func(o Option) bool { return o.Strategy == st.Name }) {
			continue // a strategy listed again (Then) is the first one
		}
		var err error
		if len(epi) > 0 {
			if st.Fused == nil {
				continue
			}
			_, err = st.Fused(n, in, epi, t)
		} else {
			_, err = st.Build(n, in, t)
		}
		if err == nil {
			out = append(out, Option{Strategy: st.Name, Knobs: st.Knobs})
		}
	}
	return out
}

// LowerChoice implements n (with the epilogues, when given) with the chosen strategy and
// knobs. A choice the table cannot build (any error of the strategy under those knobs)
// is an error wrapping ErrBadChoice.
func (s *Strategies) LowerChoice(n *graph.Node, in []Input, epi []Epilogue, t target.Target, c Choice) (*Impl, error) {
	i := slices.IndexFunc(s.candidates(n), func(st Strategy) bool { return st.Name == c.Strategy })
	if i < 0 {
		return nil, fmt.Errorf("%w: %v has no strategy %s", ErrBadChoice, n, c.Strategy)
	}
	st := s.candidates(n)[i]
	k, err := Resolve(st.Knobs, c.Knobs)
	if err != nil {
		return nil, fmt.Errorf("%v: strategy %s: %w", n, st.Name, err)
	}
	var impl *Impl
	switch {
	case st.Tuned != nil:
		impl, err = st.Tuned(n, in, epi, t, k)
	case len(epi) > 0 && st.Fused != nil:
		impl, err = st.Fused(n, in, epi, t)
	case len(epi) > 0:
		return nil, fmt.Errorf("%w: strategy %s does not fuse %v", ErrBadChoice, st.Name, n)
	default:
		impl, err = st.Build(n, in, t)
	}
	if err != nil {
		// a point of the space the schedule refuses (a knob value its preconditions
		// reject) is not a candidate: the caller builds the default
		return nil, fmt.Errorf("%w: strategy %s on %v: %v", ErrBadChoice, st.Name, n, err)
	}
	impl.Strategy = st.Name
	if len(epi) > 0 {
		impl.Strategy += "+epilogue"
	}
	return impl, nil
}
