package graph

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// ErrParse is wrapped by text-form parse errors.
var ErrParse = errors.New("cannot parse graph text")

// Parse reads the text form written by Print. Constants must be literals (Print writes
// large constants as a size and hash, which cannot be read back). Output types in the
// text are taken as written (inference is not re-run), and the module is verified.
func Parse(text string) (*Module, error) {
	p := &parser{lines: strings.Split(text, "\n")}
	m := &Module{Opsets: map[string]int64{}}
	hdr := p.next()
	if !strings.HasPrefix(hdr, "module") {
		return nil, p.errf("want 'module', got %q", hdr)
	}
	if rest := strings.TrimSpace(strings.TrimPrefix(hdr, "module")); rest != "" {
		if err := parseOpsets(rest, m.Opsets); err != nil {
			return nil, p.errf("%v", err)
		}
	}
	f, err := p.parseFunc(m, nil, map[string]*Value{})
	if err != nil {
		return nil, err
	}
	m.Main = f
	for {
		if l, ok := p.peek(); !ok || l != "" {
			if ok {
				return nil, p.errf("unexpected %q after main function", l)
			}
			break
		}
		p.next()
	}
	if err := Verify(m); err != nil {
		return nil, err
	}
	return m, nil
}

type parser struct {
	lines []string
	pos   int
}

func (p *parser) peek() (string, bool) {
	if p.pos >= len(p.lines) {
		return "", false
	}
	return strings.TrimSpace(p.lines[p.pos]), true
}

func (p *parser) next() string {
	l, _ := p.peek()
	p.pos++
	return l
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrParse, p.pos, fmt.Sprintf(format, args...))
}

func parseOpsets(s string, into map[string]int64) error {
	body, ok := strings.CutPrefix(s, "opsets(")
	if !ok || !strings.HasSuffix(body, ")") {
		return fmt.Errorf("bad opsets %q", s)
	}
	for _, item := range splitTop(strings.TrimSuffix(body, ")"), ',') {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("bad opset %q", item)
		}
		dom, err := strconv.Unquote(k)
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		into[dom] = n
	}
	return nil
}

// splitTop splits s on sep outside quotes and brackets ("" gives no parts).
func splitTop(s string, sep byte) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for {
		before, after, ok := cutTop(s, string(sep))
		out = append(out, before)
		if !ok {
			return out
		}
		s = after
	}
}

// cutTop finds the first occurrence of sub outside quotes and brackets.
func cutTop(s, sub string) (string, string, bool) {
	depth := 0
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		case c == '"':
			inStr = true
			continue
		case c == '[' || c == '(' || c == '{' || c == '<':
			depth++
		case c == ']' || c == ')' || c == '}' || c == '>':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], sub) {
			return s[:i], s[i+len(sub):], true
		}
	}
	return s, "", false
}

func parseName(s string) (string, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, "%")
	if !ok {
		return "", fmt.Errorf("want %%name, got %q", s)
	}
	if strings.HasPrefix(rest, `"`) {
		return strconv.Unquote(rest)
	}
	if !isPlainName(rest) {
		return "", fmt.Errorf("bad name %q", s)
	}
	return rest, nil
}

func (p *parser) parseFunc(m *Module, parent *Func, outer map[string]*Value) (*Func, error) {
	hdr := p.next()
	body, ok := strings.CutPrefix(hdr, "func @")
	if !ok || !strings.HasSuffix(body, "{") {
		return nil, p.errf("want 'func @name(...) {', got %q", hdr)
	}
	name, params, ok := strings.Cut(strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(body, "{")), ")"), "(")
	if !ok {
		return nil, p.errf("bad func header %q", hdr)
	}
	f := &Func{Name: name, Parent: parent}
	scope := map[string]*Value{}
	for k, v := range outer {
		scope[k] = v
	}
	for _, ps := range splitTop(params, ',') {
		n, t, ok := cutTop(ps, ":")
		if !ok {
			return nil, p.errf("bad parameter %q", ps)
		}
		v, err := p.newValue(n, t, scope)
		if err != nil {
			return nil, err
		}
		f.Params = append(f.Params, v)
	}
	for {
		line, ok := p.peek()
		if !ok {
			return nil, p.errf("func @%s is not closed", name)
		}
		switch {
		case strings.HasPrefix(line, "const "):
			p.next()
			if err := p.parseConst(f, line, scope); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "return"):
			p.next()
			for _, r := range splitTop(strings.TrimPrefix(line, "return"), ',') {
				v, err := p.ref(r, scope)
				if err != nil {
					return nil, err
				}
				f.Results = append(f.Results, v)
			}
			if p.next() != "}" {
				return nil, p.errf("want '}' after return")
			}
			return f, nil
		default:
			p.next()
			if err := p.parseNode(m, f, line, scope); err != nil {
				return nil, err
			}
		}
	}
}

func (p *parser) newValue(nameText, typeText string, scope map[string]*Value) (*Value, error) {
	n, err := parseName(nameText)
	if err != nil {
		return nil, p.errf("%v", err)
	}
	t, err := ParseType(typeText)
	if err != nil {
		return nil, p.errf("%v", err)
	}
	v := &Value{Name: n, Type: t}
	scope[n] = v
	return v, nil
}

func (p *parser) ref(text string, scope map[string]*Value) (*Value, error) {
	if strings.TrimSpace(text) == "_" {
		return nil, nil
	}
	n, err := parseName(text)
	if err != nil {
		return nil, p.errf("%v", err)
	}
	v, ok := scope[n]
	if !ok {
		return nil, p.errf("value %%%s is not defined", n)
	}
	return v, nil
}

func (p *parser) parseConst(f *Func, line string, scope map[string]*Value) error {
	decl, lit, ok := cutTop(strings.TrimPrefix(line, "const "), " = ")
	if !ok {
		return p.errf("bad const %q", line)
	}
	n, t, ok := cutTop(decl, ":")
	if !ok {
		return p.errf("bad const %q", line)
	}
	v, err := p.newValue(n, t, scope)
	if err != nil {
		return err
	}
	shape, ok := v.Type.ConstShape()
	if !ok {
		return p.errf("constant %s has a non-static type", v.Name)
	}
	tt, err := parseLiteral(v.Type.DType, shape, lit)
	if err != nil {
		return p.errf("constant %s: %v", v.Name, err)
	}
	v.Const = tt
	f.Consts = append(f.Consts, v)
	return nil
}

func parseLiteral(dt tensor.DType, shape tensor.Shape, lit string) (*tensor.Tensor, error) {
	lit = strings.TrimSpace(lit)
	if !strings.HasPrefix(lit, "[") || !strings.HasSuffix(lit, "]") {
		return nil, fmt.Errorf("not a literal (large constants do not round-trip): %q", lit)
	}
	items := splitTop(lit[1:len(lit)-1], ',')
	if len(items) != shape.NumElements() {
		return nil, fmt.Errorf("%d values for shape %v", len(items), shape)
	}
	if dt == tensor.String {
		s := make([]string, len(items))
		for i, it := range items {
			var err error
			if s[i], err = strconv.Unquote(strings.TrimSpace(it)); err != nil {
				return nil, err
			}
		}
		return tensor.FromSlice(shape, s)
	}
	if dt.IsInt() || dt == tensor.Bool {
		v := make([]int64, len(items))
		for i, it := range items {
			it = strings.TrimSpace(it)
			switch it {
			case "true":
				v[i] = 1
			case "false":
				v[i] = 0
			default:
				if dt == tensor.Uint64 {
					u, err := strconv.ParseUint(it, 10, 64)
					if err != nil {
						return nil, err
					}
					v[i] = int64(u)
					continue
				}
				x, err := strconv.ParseInt(it, 10, 64)
				if err != nil {
					return nil, err
				}
				v[i] = x
			}
		}
		return tensor.FromInt64s(dt, shape, v), nil
	}
	v := make([]float64, len(items))
	for i, it := range items {
		x, err := strconv.ParseFloat(strings.TrimSpace(it), 64)
		if err != nil {
			return nil, err
		}
		v[i] = x
	}
	return tensor.FromFloat64s(dt, shape, v), nil
}

func (p *parser) parseNode(m *Module, f *Func, line string, scope map[string]*Value) error {
	lhs, rhs, hasOuts := cutTop(line, " = ")
	if !hasOuts {
		rhs, lhs = line, ""
	}
	call, types, _ := cutTop(rhs, " : ")
	opName, rest, ok := strings.Cut(call, "(")
	if !ok {
		return p.errf("bad node %q", line)
	}
	op, known := LookupOp("", opName)
	if !known {
		op, known = LookupOp(KilnDomain, opName)
	}
	if !known || !op.Supported() {
		return p.errf("unknown or unsupported op %q", opName)
	}
	args, tail, ok := cutTop("("+rest, ")")
	if !ok {
		return p.errf("bad node %q", line)
	}
	n := &Node{Op: op}
	for _, a := range splitTop(strings.TrimPrefix(args, "("), ',') {
		v, err := p.ref(a, scope)
		if err != nil {
			return err
		}
		n.Inputs = append(n.Inputs, v)
	}
	tail = strings.TrimSpace(tail)
	if rest, ok := strings.CutPrefix(tail, "name="); ok {
		q, after, err := cutQuoted(rest)
		if err != nil {
			return p.errf("bad node name: %v", err)
		}
		n.Name, tail = q, strings.TrimSpace(after)
	}
	n.Attrs = op.NewAttrs()
	if strings.HasPrefix(tail, "{") {
		if n.Attrs == nil {
			return p.errf("%v takes no attributes", op)
		}
		if err := parseAttrs(n.Attrs, strings.TrimSuffix(strings.TrimPrefix(tail, "{"), "}")); err != nil {
			return p.errf("%v: %v", op, err)
		}
	}
	// subgraph attributes follow on their own lines: "name =" then a func block
	for {
		l, ok := p.peek()
		if !ok || !strings.HasSuffix(l, " =") {
			break
		}
		p.next()
		attr := strings.TrimSuffix(l, " =")
		sub, err := p.parseFunc(m, f, scope)
		if err != nil {
			return err
		}
		if err := setFuncAttr(n.Attrs, attr, sub); err != nil {
			return p.errf("%v", err)
		}
	}
	typeList := splitTop(types, ',')
	if lhs != "" {
		outs := splitTop(lhs, ',')
		if len(outs) != len(typeList) {
			return p.errf("%d outputs but %d types", len(outs), len(typeList))
		}
		for i, o := range outs {
			v, err := p.newValue(o, typeList[i], scope)
			if err != nil {
				return err
			}
			v.Def = n
			n.Outputs = append(n.Outputs, v)
		}
	}
	f.Nodes = append(f.Nodes, n)
	return nil
}

func cutQuoted(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", fmt.Errorf("want a quoted string")
	}
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == '"' {
			q, err := strconv.Unquote(s[:i+1])
			return q, s[i+1:], err
		}
	}
	return "", "", fmt.Errorf("unterminated string")
}

func setFuncAttr(attrs any, name string, f *Func) error {
	v := reflect.ValueOf(attrs).Elem()
	for _, fl := range AttrFields(v.Type()) {
		if fl.Name == name && fl.Type == typeFunc {
			v.Field(fl.Index).Set(reflect.ValueOf(f))
			return nil
		}
	}
	return fmt.Errorf("no subgraph attribute %q", name)
}

func parseAttrs(attrs any, body string) error {
	v := reflect.ValueOf(attrs).Elem()
	fields := map[string]AttrField{}
	for _, f := range AttrFields(v.Type()) {
		fields[f.Name] = f
	}
	for _, item := range splitTop(body, ',') {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("bad attribute %q", item)
		}
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("unknown attribute %q", k)
		}
		if err := setAttrText(v.Field(f.Index), f, val); err != nil {
			return fmt.Errorf("attribute %s: %w", k, err)
		}
	}
	return nil
}

func setAttrText(fv reflect.Value, f AttrField, s string) error {
	switch f.Type {
	case typeType:
		t, err := ParseType(s)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(&t))
		return nil
	case typeTensor:
		ty, lit, ok := strings.Cut(s, " ")
		if !ok {
			return fmt.Errorf("bad tensor %q", s)
		}
		t, err := ParseType(ty)
		if err != nil {
			return err
		}
		shape, ok := t.ConstShape()
		if !ok {
			return fmt.Errorf("tensor attribute with symbolic shape")
		}
		tt, err := parseLiteral(t.DType, shape, lit)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(tt))
		return nil
	}
	if fv.Kind() == reflect.Slice {
		if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
			return fmt.Errorf("want a list, got %q", s)
		}
		items := splitTop(s[1:len(s)-1], ',')
		sl := reflect.MakeSlice(f.Type, len(items), len(items))
		for i, it := range items {
			if err := setScalarText(sl.Index(i), strings.TrimSpace(it)); err != nil {
				return err
			}
		}
		fv.Set(sl)
		return nil
	}
	return setScalarText(fv, s)
}

func setScalarText(fv reflect.Value, s string) error {
	if fv.Kind() == reflect.String {
		q, err := strconv.Unquote(s)
		if err != nil {
			return err
		}
		fv.SetString(q)
		return nil
	}
	return setScalar(fv, s)
}
