package graph

import (
	"fmt"
	"maps"
	"slices"
)

// SymbolDef defines a symbol by the others: max(0, floor(Num / Div) + Add), with Num a
// polynomial over symbols defined before it (input symbols or earlier definitions) and
// Div > 0. It names an extent that is no polynomial of the inputs' symbols, as a strided
// window's output count floor((H + pads - span) / stride) + 1 over a symbolic H (0 where
// the input is smaller than the window, as Window.Axis has it): the generic executable
// computes it from the bound symbols when a call starts.
type SymbolDef struct {
	Name string
	Num  Dim
	Div  int64
	Add  int64
}

func (d SymbolDef) String() string {
	return fmt.Sprintf("%s = max(0, floor((%v) / %d) + %d)", d.Name, d.Num, d.Div, d.Add)
}

// Eval computes the symbol from the values in env; ok is false when env lacks one of
// Num's symbols.
func (d SymbolDef) Eval(env map[string]int64) (int64, bool) {
	n, ok := d.Num.Eval(env)
	if !ok {
		return 0, false
	}
	return constDerived(n, d.Div, d.Add), true
}

// Derive returns the extent max(0, floor(num / div) + add): a constant when num is one,
// an exact quotient where div divides num (taken to be at least 0, as a polynomial
// extent over symbols is), else a symbol defined by a SymbolDef. The same
// expression gives the same symbol (two branches that stride an extent alike agree).
// It panics on div < 1 (a window's stride is checked positive before).
func (m *Module) Derive(num Dim, div, add int64) Dim {
	if div < 1 {
		panic(fmt.Sprintf("BUG: a derived extent divided by %d", div))
	}
	if v, ok := num.Value(); ok {
		return Const(constDerived(v, div, add))
	}
	if q, ok := num.Div(Const(div)); ok {
		return q.Add(Const(add))
	}
	key := fmt.Sprintf("%v/%d+%d", num, div, add)
	if name, ok := m.derived[key]; ok {
		return Sym(name)
	}
	s := m.FreshSymbol()
	name, _ := s.IsSym()
	if m.derived == nil {
		m.derived = map[string]string{}
	}
	m.derived[key] = name
	m.defs = append(m.defs, SymbolDef{Name: name, Num: num, Div: div, Add: add})
	return s
}

// SymbolDefs lists the module's derived symbols in the order they were made: each
// definition names only symbols of the inputs and of the definitions before it.
func (m *Module) SymbolDefs() []SymbolDef { return slices.Clone(m.defs) }

// SubstSymbolDefs rewrites the definitions' numerators with s (a fold that learned a
// symbol's value as an expression of others).
func (m *Module) SubstSymbolDefs(s map[string]Dim) {
	for i := range m.defs {
		m.defs[i].Num = m.defs[i].Num.Subst(s)
	}
}

// cloneDefs copies the definitions into c.
func (m *Module) cloneDefs(c *Module) {
	c.defs = slices.Clone(m.defs)
	c.derived = maps.Clone(m.derived)
}

// Derived is Module.Derive for an inference: with no module (tests) a fresh symbol.
func (ic *InferCtx) Derived(num Dim, div, add int64) Dim {
	if ic == nil || ic.M == nil {
		if v, ok := num.Value(); ok {
			return Const(constDerived(v, div, add))
		}
		return ic.Fresh()
	}
	return ic.M.Derive(num, div, add)
}

// constDerived is max(0, floor(v / div) + add) (no window fits: no output).
func constDerived(v, div, add int64) int64 {
	q := v / div
	if v%div != 0 && v < 0 {
		q--
	}
	return max(q+add, 0)
}
