package graph

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrVerify is wrapped by every verifier finding.
var ErrVerify = errors.New("graph verification failed")

// Verify checks the structural invariants of a module: every value is defined exactly once
// before it is used (in its own Func or an enclosing one), nodes have supported ops with
// input/output counts and attribute structs that match the op table and attribute values
// within their fields' minimums, outputs point back to their node, types are well-formed
// (with a byte count that fits an int64), and subgraphs name their parent.
func Verify(m *Module) error {
	if m == nil || m.Main == nil {
		return fmt.Errorf("%w: module has no main function", ErrVerify)
	}
	if m.Main.Parent != nil {
		return fmt.Errorf("%w: main function has a parent", ErrVerify)
	}
	return verifyFunc(m.Main, map[*Value]int{})
}

// verifyFunc checks f. visible counts, per value, the Funcs being verified (f and the
// Funcs enclosing it) that define it: a value may be read where the count is positive.
// One map for all depths keeps a lookup constant-time however deep subgraphs nest.
func verifyFunc(f *Func, visible map[*Value]int) error {
	defined := map[*Value]bool{}
	defer func() {
		for v := range defined {
			if visible[v]--; visible[v] == 0 {
				delete(visible, v)
			}
		}
	}()
	has := func(v *Value) bool { return visible[v] > 0 }
	errf := func(format string, args ...any) error {
		return fmt.Errorf("%w: func @%s: %s", ErrVerify, f.Name, fmt.Sprintf(format, args...))
	}
	define := func(v *Value, what string) error {
		if v == nil {
			return errf("nil %s", what)
		}
		if defined[v] {
			return errf("value %s defined twice", valueName(v))
		}
		if err := checkType(v.Type); err != nil {
			return errf("value %s: %v", valueName(v), err)
		}
		defined[v] = true
		visible[v]++
		return nil
	}
	for _, p := range f.Params {
		if err := define(p, "parameter"); err != nil {
			return err
		}
		if p.Def != nil {
			return errf("parameter %s has a defining node", valueName(p))
		}
	}
	for _, c := range f.Consts {
		if err := define(c, "constant"); err != nil {
			return err
		}
		if c.Const == nil {
			return errf("constant %s has no data", valueName(c))
		}
		if err := c.Const.Check(); err != nil {
			return errf("constant %s: %v", valueName(c), err)
		}
	}
	for _, n := range f.Nodes {
		info := n.Op.Info()
		if info == nil {
			return errf("node %v: op not supported", n)
		}
		if len(n.Inputs) < info.MinIn || (info.MaxIn >= 0 && len(n.Inputs) > info.MaxIn) {
			return errf("node %v: %d inputs, want %d..%d", n, len(n.Inputs), info.MinIn, info.MaxIn)
		}
		if len(n.Outputs) < info.MinOut || (info.MaxOut >= 0 && len(n.Outputs) > info.MaxOut) {
			return errf("node %v: %d outputs, want %d..%d", n, len(n.Outputs), info.MinOut, info.MaxOut)
		}
		switch {
		case info.Attrs == nil && n.Attrs != nil:
			return errf("node %v: op takes no attributes, has %T", n, n.Attrs)
		case info.Attrs != nil && (n.Attrs == nil || reflect.TypeOf(n.Attrs) != reflect.PointerTo(info.Attrs)):
			return errf("node %v: attributes are %T, want *%v", n, n.Attrs, info.Attrs)
		}
		if err := CheckAttrs(n); err != nil {
			return errf("%v", err)
		}
		for i, in := range n.Inputs {
			if in != nil && !has(in) {
				return errf("node %v: input %d (%s) is used before it is defined", n, i, valueName(in))
			}
		}
		for _, sub := range n.Subgraphs() {
			if sub.Parent != f {
				return errf("node %v: subgraph @%s does not name @%s as parent", n, sub.Name, f.Name)
			}
			if err := verifyFunc(sub, visible); err != nil {
				return fmt.Errorf("in node %v: %w", n, err)
			}
		}
		for i, out := range n.Outputs {
			if err := define(out, "output"); err != nil {
				return err
			}
			if out.Def != n {
				return errf("node %v: output %d (%s) does not point back to its node", n, i, valueName(out))
			}
		}
	}
	for i, r := range f.Results {
		if r == nil || !has(r) {
			return errf("result %d is not defined", i)
		}
	}
	return nil
}

func checkType(t Type) error {
	switch t.Kind {
	case KindTensor:
		if !t.DType.Valid() {
			return fmt.Errorf("invalid dtype %d", t.DType)
		}
		if t.UnknownRank && len(t.Shape) > 0 {
			return fmt.Errorf("unknown rank with %d dims", len(t.Shape))
		}
		for _, d := range t.Shape {
			if v, ok := d.Value(); ok && v < 0 {
				return fmt.Errorf("negative extent %d", v)
			}
		}
		if err := CheckTypeSize(t); err != nil {
			return err
		}
		switch {
		case t.Scope == ScopeTexture:
			if err := checkTexture(t); err != nil {
				return err
			}
		case t.Packing != 0:
			return fmt.Errorf("a %v value has no texture packing, got %v", t.Scope, t.Packing)
		default:
			if err := CheckBlock(t, t.Block); err != nil {
				return err
			}
		}
	case KindSequence, KindOptional:
		if t.Elem != nil {
			return checkType(*t.Elem)
		}
	default:
		return fmt.Errorf("invalid kind %d", t.Kind)
	}
	return nil
}
