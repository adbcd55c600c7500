package passes

import (
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// half reports the 16-bit float types the kernels hold but do not compute in.
func half(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

// dtypeAttrs are the attribute names whose integer value is an element type (Cast's to,
// the generators' dtype, the windows' output_datatype).
var dtypeAttrs = map[string]bool{"to": true, "dtype": true, "output_datatype": true}

// WidenHalf computes every float16 and bfloat16 value in float32 (widen-half): the
// kernels have no half-precision arithmetic (most CPUs have none), so a model stored in
// half precision is computed in float32, its constants taking twice their stored bytes in
// memory. Main's parameters and results keep their types (the
// caller passes and receives half-precision tensors): a Cast to float32 follows each such
// parameter and a Cast back precedes each such result. Inside, the values' types,
// constants, the element type attributes (Cast's to, the generators' dtype) and tensor
// attributes (ConstantOfShape's value) become float32, in subgraphs too. The answers
// round to half precision once, at the results, not after every op: they are as close to
// the exact ones as float32 arithmetic is, where ONNX Runtime's may differ by a few
// half-precision units, and a value past half precision's range (65504) stays finite
// inside.
func WidenHalf(_ *Context, m *graph.Module) error {
	if !holdsHalf(m) {
		return nil
	}
	names := moduleNames(m)
	main := m.Main
	isParam := map[*graph.Value]bool{}
	for _, p := range main.Params {
		isParam[p] = true
	}
	// the results to cast back: half tensors that are not parameters returned as they came
	back := map[*graph.Value]tensor.DType{}
	for _, r := range main.Results {
		if r.Type.Kind == graph.KindTensor && half(r.Type.DType) && !isParam[r] {
			back[r] = r.Type.DType
		}
	}
	// parameters: a Cast to float32 each, which every use inside reads instead
	subst := map[*graph.Value]*graph.Value{}
	var head []*graph.Node
	for _, p := range main.Params {
		if p.Type.Kind != graph.KindTensor || !half(p.Type.DType) {
			continue
		}
		w := &graph.Value{Name: names.fresh(p.Name + "_f32"), Type: p.Type}
		w.Type.DType = tensor.Float32
		head = append(head, castNode(p, w))
		subst[p] = w
	}
	main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			for i, v := range n.Inputs {
				if w, ok := subst[v]; ok {
					n.Inputs[i] = w
				}
			}
		}
		if f != main {
			for i, v := range f.Results {
				if w, ok := subst[v]; ok {
					f.Results[i] = w
				}
			}
		}
	})
	// every other value, constant and attribute in float32
	main.Funcs(func(f *graph.Func) {
		if f != main {
			for _, v := range f.Params {
				widenType(&v.Type)
			}
		}
		for _, v := range f.Consts {
			if v.Const != nil && half(v.Const.DType) {
				v.Const = v.Const.Cast(tensor.Float32)
			}
			widenType(&v.Type)
		}
		for _, n := range f.Nodes {
			widenAttrs(n.Attrs)
			for _, v := range n.Outputs {
				if v != nil {
					widenType(&v.Type)
				}
			}
		}
	})
	// results: a Cast back to the half type, its output taking the result's name (the
	// model's output name) and the widened value a fresh one
	var tail []*graph.Node
	done := map[*graph.Value]*graph.Value{}
	for i, r := range main.Results {
		dt, ok := back[r]
		if !ok {
			continue
		}
		if out, ok := done[r]; ok {
			main.Results[i] = out
			continue
		}
		out := &graph.Value{Name: r.Name, Type: r.Type}
		out.Type.DType = dt
		r.Name = names.fresh(r.Name + "_f32")
		tail = append(tail, castNode(r, out))
		done[r] = out
		main.Results[i] = out
	}
	main.Nodes = append(append(head, main.Nodes...), tail...)
	return nil
}

// castNode is a Cast from in to out's element type, out defined by it.
func castNode(in, out *graph.Value) *graph.Node {
	n := &graph.Node{Op: graph.OpCast, Inputs: []*graph.Value{in}, Outputs: []*graph.Value{out},
		Attrs: &graph.CastAttrs{To: int64(out.Type.DType), Saturate: 1}}
	out.Def = n
	return n
}

// holdsHalf reports whether any value, constant or element-type attribute of m is
// float16 or bfloat16 (then WidenHalf has work).
func holdsHalf(m *graph.Module) bool {
	found := false
	m.Main.Funcs(func(f *graph.Func) {
		for _, v := range f.Params {
			found = found || halfType(v.Type)
		}
		for _, v := range f.Consts {
			found = found || halfType(v.Type)
		}
		for _, n := range f.Nodes {
			for _, v := range n.Outputs {
				found = found || (v != nil && halfType(v.Type))
			}
			found = found || widenAttrs(cloneAttrs(n.Attrs))
		}
	})
	return found
}

func halfType(t graph.Type) bool {
	for ; ; t = *t.Elem {
		if half(t.DType) {
			return true
		}
		if t.Elem == nil {
			return false
		}
	}
}

// widenType makes a half element type (of a tensor, or a sequence's tensors) float32.
func widenType(t *graph.Type) {
	for ; t != nil; t = t.Elem {
		if half(t.DType) {
			t.DType = tensor.Float32
		}
	}
}

// widenAttrs makes the element-type attributes (dtypeAttrs) and tensor attributes of an
// attribute struct that are half float32, and reports whether it changed one.
func widenAttrs(attrs any) bool {
	if attrs == nil {
		return false
	}
	v := reflect.ValueOf(attrs)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	v = v.Elem()
	changed := false
	for i := range v.NumField() {
		f, field := v.Field(i), v.Type().Field(i)
		switch {
		case f.Kind() == reflect.Int64 && dtypeAttrs[field.Tag.Get("attr")]:
			if half(tensor.DType(f.Int())) {
				f.SetInt(int64(tensor.Float32))
				changed = true
			}
		case field.Type == reflect.TypeFor[*tensor.Tensor]() && !f.IsNil():
			if t := f.Interface().(*tensor.Tensor); half(t.DType) {
				f.Set(reflect.ValueOf(t.Cast(tensor.Float32)))
				changed = true
			}
		}
	}
	return changed
}

// cloneAttrs copies an attribute struct (shallowly) so that widenAttrs can test it.
func cloneAttrs(attrs any) any {
	v := reflect.ValueOf(attrs)
	if attrs == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface()
}
