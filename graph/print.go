package graph

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// maxLiteral is the element count up to which constants print their values (and so
// round-trip through Parse); larger constants print a size and a content hash.
const maxLiteral = 64

// Print renders the module as text. The form is stable and Parse reads it back (except
// for constants larger than maxLiteral elements).
func Print(m *Module) string {
	var b strings.Builder
	b.WriteString("module")
	if len(m.Opsets) > 0 {
		doms := make([]string, 0, len(m.Opsets))
		for d := range m.Opsets {
			doms = append(doms, d)
		}
		sort.Strings(doms)
		parts := make([]string, len(doms))
		for i, d := range doms {
			parts[i] = fmt.Sprintf("%s=%d", strconv.Quote(d), m.Opsets[d])
		}
		b.WriteString(" opsets(" + strings.Join(parts, ", ") + ")")
	}
	b.WriteString("\n")
	printFunc(&b, m.Main, 0)
	return b.String()
}

// PrintFunc renders one function.
func PrintFunc(f *Func) string {
	var b strings.Builder
	printFunc(&b, f, 0)
	return b.String()
}

func printFunc(b *strings.Builder, f *Func, indent int) {
	pad := strings.Repeat("  ", indent)
	params := make([]string, len(f.Params))
	for i, p := range f.Params {
		params[i] = valueName(p) + ": " + p.Type.String()
	}
	fmt.Fprintf(b, "%sfunc @%s(%s) {\n", pad, f.Name, strings.Join(params, ", "))
	for _, c := range f.Consts {
		fmt.Fprintf(b, "%s  const %s: %s = %s\n", pad, valueName(c), c.Type, constBody(c.Const))
	}
	for _, n := range f.Nodes {
		printNode(b, n, indent+1)
	}
	res := make([]string, len(f.Results))
	for i, r := range f.Results {
		res[i] = valueName(r)
	}
	fmt.Fprintf(b, "%s  return %s\n%s}\n", pad, strings.Join(res, ", "), pad)
}

func printNode(b *strings.Builder, n *Node, indent int) {
	pad := strings.Repeat("  ", indent)
	outs := make([]string, len(n.Outputs))
	types := make([]string, len(n.Outputs))
	for i, o := range n.Outputs {
		outs[i] = valueName(o)
		types[i] = o.Type.String()
	}
	ins := make([]string, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			ins[i] = "_"
		} else {
			ins[i] = valueName(v)
		}
	}
	b.WriteString(pad)
	if len(outs) > 0 {
		b.WriteString(strings.Join(outs, ", ") + " = ")
	}
	fmt.Fprintf(b, "%s(%s)", n.Op, strings.Join(ins, ", "))
	if n.Name != "" {
		b.WriteString(" name=" + strconv.Quote(n.Name))
	}
	b.WriteString(formatAttrs(n.Attrs))
	if len(types) > 0 {
		b.WriteString(" : " + strings.Join(types, ", "))
	}
	b.WriteString("\n")
	if n.Attrs != nil {
		v := reflect.ValueOf(n.Attrs).Elem()
		for _, f := range AttrFields(v.Type()) {
			if f.Type == typeFunc && !v.Field(f.Index).IsNil() {
				fmt.Fprintf(b, "%s  %s =\n", pad, f.Name)
				printFunc(b, v.Field(f.Index).Interface().(*Func), indent+2)
			}
		}
	}
}

// valueName prints %name, quoting names that are not plain identifiers.
func valueName(v *Value) string {
	if isPlainName(v.Name) {
		return "%" + v.Name
	}
	return "%" + strconv.Quote(v.Name)
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

func constBody(t *tensor.Tensor) string {
	if t.Len() <= maxLiteral {
		return literalValues(t)
	}
	h := fnv.New64a()
	if raw, err := t.Raw(); err == nil {
		h.Write(raw)
	} else {
		fmt.Fprint(h, t.Data)
	}
	return fmt.Sprintf("<%d elements, fnv %016x>", t.Len(), h.Sum64())
}

func literalValues(t *tensor.Tensor) string {
	rv := reflect.ValueOf(t.Data)
	parts := make([]string, rv.Len())
	for i := range parts {
		switch x := rv.Index(i).Interface().(type) {
		case float32:
			parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
		case float64:
			parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
		case tensor.Float16Bits:
			parts[i] = strconv.FormatFloat(float64(tensor.F16ToF32(x)), 'g', -1, 32)
		case tensor.BFloat16Bits:
			parts[i] = strconv.FormatFloat(float64(tensor.BF16ToF32(x)), 'g', -1, 32)
		case string:
			parts[i] = strconv.Quote(x)
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// formatTensorLiteral prints a tensor attribute as `dtype[shape] [values]`.
func formatTensorLiteral(t *tensor.Tensor) string {
	shape := make([]Dim, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = Const(int64(d))
	}
	return TensorType(t.DType, shape...).String() + " " + constBody(t)
}
