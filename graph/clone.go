package graph

import (
	"maps"
	"reflect"
	"slices"
)

// Clone returns a deep copy of the module's graph structure: new Funcs, Nodes and
// Values (types copied), attribute structs copied with their subgraphs cloned. Constant
// tensors are shared, not copied: passes replace constants, they never write into them.
func Clone(m *Module) *Module {
	c := &cloner{vals: map[*Value]*Value{}, funcs: map[*Func]*Func{}}
	out := &Module{Opsets: maps.Clone(m.Opsets), Producer: m.Producer, Symbols: slices.Clone(m.Symbols), Defaults: maps.Clone(m.Defaults), fresh: m.fresh}
	m.cloneDefs(out)
	out.Main = c.fn(m.Main, nil)
	return out
}

type cloner struct {
	vals  map[*Value]*Value
	funcs map[*Func]*Func
}

func (c *cloner) val(v *Value) *Value {
	if v == nil {
		return nil
	}
	if nv, ok := c.vals[v]; ok {
		return nv
	}
	nv := &Value{Name: v.Name, Type: cloneType(v.Type), Const: v.Const}
	c.vals[v] = nv
	return nv
}

func cloneType(t Type) Type {
	t.Shape = slices.Clone(t.Shape)
	t.Known = slices.Clone(t.Known)
	if t.Elem != nil {
		e := cloneType(*t.Elem)
		t.Elem = &e
	}
	return t
}

func (c *cloner) fn(f *Func, parent *Func) *Func {
	nf := &Func{Name: f.Name, Parent: parent}
	c.funcs[f] = nf
	for _, p := range f.Params {
		nf.Params = append(nf.Params, c.val(p))
	}
	for _, k := range f.Consts {
		nf.Consts = append(nf.Consts, c.val(k))
	}
	for _, n := range f.Nodes {
		nn := &Node{Op: n.Op, Name: n.Name}
		for _, in := range n.Inputs {
			nn.Inputs = append(nn.Inputs, c.val(in))
		}
		for _, o := range n.Outputs {
			no := c.val(o)
			no.Def = nn
			nn.Outputs = append(nn.Outputs, no)
		}
		nn.Attrs = c.attrs(n.Attrs, nf)
		nf.Nodes = append(nf.Nodes, nn)
	}
	for _, r := range f.Results {
		nf.Results = append(nf.Results, c.val(r))
	}
	return nf
}

// attrs copies an attribute struct, cloning the subgraphs it holds (their Parent is the
// Func holding the node).
func (c *cloner) attrs(a any, holder *Func) any {
	if a == nil {
		return nil
	}
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return a
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	for _, f := range AttrFields(v.Elem().Type()) {
		fv := cp.Elem().Field(f.Index)
		switch {
		case f.Type == typeFunc && !fv.IsNil():
			fv.Set(reflect.ValueOf(c.fn(fv.Interface().(*Func), holder)))
		case fv.Kind() == reflect.Slice && !fv.IsNil():
			fv.Set(reflect.AppendSlice(reflect.MakeSlice(fv.Type(), 0, fv.Len()), fv))
		}
	}
	return cp.Interface()
}
