package onnx

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// importer builds a graph.Module from a decoded ModelProto.
type importer struct {
	m      *graph.Module
	opsets map[string]int64
	td     *tensorDecoder
	rules  map[graph.Op]func(c *nodeConv) (bool, error)
	unique int
	free   map[*onnxpb.GraphProto][]string // freeNames, memoized
	ir     int64                           // the model's IR version
}

// scope maps ONNX value names to graph values; subgraphs see their parents' names. All
// scopes of one import share the table of visible names (per name, its definitions in
// the open scopes, innermost last), and a subgraph's scope is closed once it is built,
// so a lookup costs the same at any depth of nesting.
type scope struct {
	vals    map[string]*graph.Value // defined in this scope
	visible map[string][]*graph.Value
}

func newScope() *scope {
	return &scope{vals: map[string]*graph.Value{}, visible: map[string][]*graph.Value{}}
}

// sub opens the scope of a subgraph of s.
func (s *scope) sub() *scope {
	return &scope{vals: map[string]*graph.Value{}, visible: s.visible}
}

// close hides the names s defined again.
func (s *scope) close() {
	for name := range s.vals {
		vs := s.visible[name]
		s.visible[name] = vs[:len(vs)-1]
	}
}

func (s *scope) lookup(name string) (*graph.Value, bool) {
	if vs := s.visible[name]; len(vs) > 0 {
		return vs[len(vs)-1], true
	}
	return nil, false
}

func (im *importer) define(sc *scope, v *graph.Value) error {
	if _, dup := sc.vals[v.Name]; dup {
		return invalidf("value %q is defined twice", v.Name)
	}
	sc.vals[v.Name] = v
	sc.visible[v.Name] = append(sc.visible[v.Name], v)
	return nil
}

// buildGraph fills b's Func from g. In the main graph, an initializer that is also listed
// as an input is the input's default (Module.Defaults) from IR version 4 on: the input
// stays a parameter a caller may give or omit. Before IR version 4 every initializer was
// listed as an input, so there they are constants (folded like any weight). In
// subgraphs every input is a parameter, typed from the declaration or, when the
// declaration is missing, from hints. Nodes are imported in topological order
// (sortNodes).
func (im *importer) buildGraph(g *onnxpb.GraphProto, b *graph.Builder, sc *scope, main bool, hints []graph.Type) error {
	listed := map[string]bool{}
	if main {
		inputs := map[string]bool{}
		for _, in := range g.GetInput() {
			inputs[in.GetName()] = true
		}
		var names []string
		for _, tp := range g.GetInitializer() {
			names = append(names, tp.GetName())
		}
		if overridable(im.ir, names, func(n string) bool { return inputs[n] }) {
			listed = inputs
		}
	}
	inits := map[string]bool{}
	defaults := map[string]*tensor.Tensor{}
	for _, tp := range g.GetInitializer() {
		t, err := im.td.decode(tp)
		if err != nil {
			return fmt.Errorf("initializer: %w", err)
		}
		inits[tp.GetName()] = true
		if listed[tp.GetName()] {
			defaults[tp.GetName()] = t
			continue
		}
		if err := im.define(sc, b.Const(tp.GetName(), t)); err != nil {
			return err
		}
	}
	if len(g.GetSparseInitializer()) > 0 {
		return unsupportedf("sparse initializers")
	}
	k := 0
	for _, in := range g.GetInput() {
		def, hasDefault := defaults[in.GetName()]
		if main && inits[in.GetName()] && !hasDefault {
			continue
		}
		var t graph.Type
		var err error
		declared := in.GetType() != nil && (in.GetType().GetTensorType() == nil || in.GetType().GetTensorType().ElemType != nil)
		switch {
		case declared:
			t, err = convertType(im.m, in.GetType(), fmt.Sprintf("input %q", in.GetName()))
		case hasDefault:
			t = graph.NewConst(in.GetName(), def).Type
			t.Known = nil
		case k < len(hints):
			t = hints[k]
		default:
			err = invalidf("input %q has no type", in.GetName())
		}
		if err == nil && hasDefault {
			err = checkDefault(in.GetName(), t, def)
		}
		if err != nil {
			return err
		}
		if err := im.define(sc, b.Param(in.GetName(), t)); err != nil {
			return err
		}
		if hasDefault {
			if im.m.Defaults == nil {
				im.m.Defaults = map[string]*tensor.Tensor{}
			}
			im.m.Defaults[in.GetName()] = def
		}
		k++
	}
	nodes, err := im.sortNodes(g)
	if err != nil {
		return err
	}
	for _, np := range nodes {
		if err := im.node(b, sc, np); err != nil {
			return err
		}
	}
	var results []*graph.Value
	for _, out := range g.GetOutput() {
		v, ok := sc.lookup(out.GetName())
		if !ok {
			return invalidf("graph output %q is not produced by any node", out.GetName())
		}
		results = append(results, v)
	}
	b.Return(results...)
	return nil
}

// nodeConv is one NodeProto being converted; upgrade rules edit it in place.
type nodeConv struct {
	im       *importer
	b        *graph.Builder
	sc       *scope
	np       *onnxpb.NodeProto
	op       graph.Op
	opset    int64
	inputs   []*graph.Value
	attrs    map[string]*onnxpb.AttributeProto
	outNames []string
}

func (c *nodeConv) unsupported(reason string, args ...any) error {
	return &UnsupportedOpError{Domain: c.np.GetDomain(), Op: c.np.GetOpType(), Node: c.np.GetName(), Opset: c.opset, Reason: fmt.Sprintf(reason, args...)}
}

func (c *nodeConv) errorf(format string, args ...any) error {
	return fmt.Errorf("node %q (%s, opset %d): %w", c.np.GetName(), c.np.GetOpType(), c.opset, fmt.Errorf(format, args...))
}

func (im *importer) node(b *graph.Builder, sc *scope, np *onnxpb.NodeProto) error {
	dom := np.GetDomain()
	if dom == "ai.onnx" {
		dom = ""
	}
	opset, imported := im.opsets[dom]
	c := &nodeConv{im: im, b: b, sc: sc, np: np, opset: opset, attrs: map[string]*onnxpb.AttributeProto{}}
	if !imported {
		return c.unsupported("domain %q is not in the model's opset imports", np.GetDomain())
	}
	switch {
	case dom == graph.TrainingDomain && opset != 1:
		return c.unsupported("domain %q at opset %d (kiln knows opset 1)", np.GetDomain(), opset)
	case dom != "" && dom != graph.TrainingDomain:
		return c.unsupported("domain %q is not supported", np.GetDomain())
	}
	for _, a := range np.GetAttribute() {
		if a.GetRefAttrName() != "" {
			return c.unsupported("attribute %q refers to a function attribute", a.GetName())
		}
		c.attrs[a.GetName()] = a
	}
	for _, name := range np.GetInput() {
		if name == "" {
			c.inputs = append(c.inputs, nil)
			continue
		}
		v, ok := sc.lookup(name)
		if !ok {
			return c.errorf("%w: input %q is not defined before use", ErrInvalid, name)
		}
		c.inputs = append(c.inputs, v)
	}
	for len(c.inputs) > 0 && c.inputs[len(c.inputs)-1] == nil {
		c.inputs = c.inputs[:len(c.inputs)-1]
	}
	c.outNames = append(c.outNames, np.GetOutput()...)
	for len(c.outNames) > 0 && c.outNames[len(c.outNames)-1] == "" {
		c.outNames = c.outNames[:len(c.outNames)-1]
	}
	for i, o := range c.outNames {
		if o == "" {
			im.unique++
			c.outNames[i] = "_unused" + strconv.Itoa(im.unique)
		}
	}
	if np.GetOpType() == "Constant" {
		return c.constant()
	}
	op, known := graph.LookupOp(dom, np.GetOpType())
	if !known {
		return c.unsupported("%s", unknownOpReason(dom, np.GetOpType()))
	}
	c.op = op
	delete(c.attrs, "consumed_inputs") // a legacy optimizer hint with no semantics
	// upgrade rules run first: they may rewrite a deprecated op into a supported one
	// (Upsample → Resize, Scatter → ScatterElements)
	if up := im.rules[op]; up != nil {
		if !op.Supported() && !rewritesOp(op) {
			return c.unsupported("not implemented in kiln yet")
		}
		done, err := up(c)
		if err != nil || done {
			return err
		}
	}
	if !c.op.Supported() {
		return c.unsupported("not implemented in kiln yet")
	}
	return c.emit(c.op, c.inputs, c.outNames)
}

// rewritesOp reports deprecated ops whose upgrade rule replaces them by another op.
func rewritesOp(op graph.Op) bool { return op == graph.OpUpsample || op == graph.OpScatter }

// emit decodes the remaining attributes into op's struct and adds the node.
func (c *nodeConv) emit(op graph.Op, inputs []*graph.Value, outNames []string) error {
	attrs, err := c.decodeAttrs(op)
	if err != nil {
		return err
	}
	outs, err := c.b.NodeNamed(op, c.np.GetName(), attrs, outNames, inputs...)
	if err != nil {
		// the model's types do not fit the op: a malformed model
		return c.errorf("%w: %w", ErrInvalid, err)
	}
	for _, o := range outs {
		if err := c.im.define(c.sc, o); err != nil {
			return c.errorf("%w", err)
		}
	}
	return nil
}

// decodeAttrs fills op's attribute struct from c.attrs; an attribute the struct does not
// know is unsupported (never silently ignored).
func (c *nodeConv) decodeAttrs(op graph.Op) (any, error) {
	ptr := op.NewAttrs()
	if ptr == nil {
		for name := range c.attrs {
			return nil, c.unsupported("attribute %q", name)
		}
		return nil, nil
	}
	v := reflect.ValueOf(ptr).Elem()
	seen := map[string]bool{}
	for _, f := range graph.AttrFields(v.Type()) {
		a, ok := c.attrs[f.Name]
		if !ok {
			if f.Required {
				return nil, c.errorf("%w: required attribute %q is missing", ErrInvalid, f.Name)
			}
			continue
		}
		seen[f.Name] = true
		if err := c.setField(v.Field(f.Index), f, a); err != nil {
			return nil, err
		}
	}
	for name := range c.attrs {
		if !seen[name] {
			return nil, c.unsupported("attribute %q", name)
		}
	}
	return ptr, nil
}

func (c *nodeConv) setField(fv reflect.Value, f graph.AttrField, a *onnxpb.AttributeProto) error {
	bad := func() error {
		return c.errorf("%w: attribute %q has type %v, want %v", ErrInvalid, f.Name, a.GetType(), f.Type)
	}
	typ := a.GetType()
	switch f.Type.Kind() {
	case reflect.Int64:
		if typ != onnxpb.AttributeProto_INT {
			return bad()
		}
		fv.SetInt(a.GetI())
		return nil
	case reflect.Float32:
		switch typ {
		case onnxpb.AttributeProto_FLOAT:
			fv.SetFloat(float64(a.GetF()))
		case onnxpb.AttributeProto_INT:
			fv.SetFloat(float64(a.GetI()))
		default:
			return bad()
		}
		return nil
	case reflect.String:
		if typ != onnxpb.AttributeProto_STRING {
			return bad()
		}
		fv.SetString(string(a.GetS()))
		return nil
	}
	switch f.Type {
	case reflect.TypeFor[[]int64]():
		if typ != onnxpb.AttributeProto_INTS {
			return bad()
		}
		fv.Set(reflect.ValueOf(append([]int64{}, a.GetInts()...)))
	case reflect.TypeFor[[]float32]():
		if typ != onnxpb.AttributeProto_FLOATS {
			return bad()
		}
		fv.Set(reflect.ValueOf(append([]float32{}, a.GetFloats()...)))
	case reflect.TypeFor[[]string]():
		if typ != onnxpb.AttributeProto_STRINGS {
			return bad()
		}
		s := make([]string, len(a.GetStrings()))
		for i, b := range a.GetStrings() {
			s[i] = string(b)
		}
		fv.Set(reflect.ValueOf(s))
	case reflect.TypeFor[*tensor.Tensor]():
		if typ != onnxpb.AttributeProto_TENSOR {
			return bad()
		}
		t, err := c.im.td.decode(a.GetT())
		if err != nil {
			return c.errorf("attribute %q: %w", f.Name, err)
		}
		fv.Set(reflect.ValueOf(t))
	case reflect.TypeFor[*graph.Type]():
		if typ != onnxpb.AttributeProto_TYPE_PROTO {
			return bad()
		}
		t, err := convertType(c.im.m, a.GetTp(), "attribute "+f.Name)
		if err != nil {
			return c.errorf("%w", err)
		}
		fv.Set(reflect.ValueOf(&t))
	case reflect.TypeFor[*graph.Func]():
		if typ != onnxpb.AttributeProto_GRAPH {
			return bad()
		}
		sub := c.b.Sub(f.Name)
		sc := c.sc.sub()
		if err := c.im.buildGraph(a.GetG(), sub, sc, false, c.bodyHints()); err != nil {
			return c.errorf("subgraph %q: %w", f.Name, err)
		}
		sc.close()
		fv.Set(reflect.ValueOf(sub.F))
	default:
		return bad()
	}
	return nil
}

// bodyHints types the parameters of a Loop/Scan/SequenceMap body whose declaration leaves
// them untyped, from the node's own inputs.
func (c *nodeConv) bodyHints() []graph.Type {
	var hints []graph.Type
	switch c.op {
	case graph.OpLoop:
		hints = append(hints, graph.TensorType(tensor.Int64), graph.TensorType(tensor.Bool))
		for _, v := range c.inputs[min(2, len(c.inputs)):] {
			if v != nil {
				hints = append(hints, v.Type)
			}
		}
	case graph.OpSequenceMap:
		for _, v := range c.inputs {
			if v != nil && v.Type.Kind == graph.KindSequence && v.Type.Elem != nil {
				hints = append(hints, *v.Type.Elem)
			} else if v != nil {
				hints = append(hints, v.Type)
			}
		}
	}
	return hints
}

// constant turns a Constant node into a constant value.
func (c *nodeConv) constant() error {
	if len(c.attrs) != 1 || len(c.outNames) != 1 {
		return c.errorf("%w: Constant needs exactly one value attribute and one output", ErrInvalid)
	}
	var t *tensor.Tensor
	for name, a := range c.attrs {
		switch name {
		case "value":
			var err error
			if t, err = c.im.td.decode(a.GetT()); err != nil {
				return c.errorf("%w", err)
			}
		case "value_float":
			t = tensor.Scalar(a.GetF())
		case "value_floats":
			t = tensor.MustFromSlice(tensor.Shape{len(a.GetFloats())}, append([]float32{}, a.GetFloats()...))
		case "value_int":
			t = tensor.Scalar(a.GetI())
		case "value_ints":
			t = tensor.MustFromSlice(tensor.Shape{len(a.GetInts())}, append([]int64{}, a.GetInts()...))
		case "value_string":
			t = tensor.Scalar(string(a.GetS()))
		case "value_strings":
			s := make([]string, len(a.GetStrings()))
			for i, b := range a.GetStrings() {
				s[i] = string(b)
			}
			t = tensor.MustFromSlice(tensor.Shape{len(s)}, s)
		case "sparse_value":
			return c.unsupported("sparse constant")
		default:
			return c.unsupported("attribute %q", name)
		}
	}
	return c.im.define(c.sc, c.b.Const(c.outNames[0], t))
}

// constInput adds a constant and returns it (for attributes that became inputs).
func (c *nodeConv) constInput(t *tensor.Tensor) *graph.Value {
	c.im.unique++
	return c.b.Const(c.np.GetName()+"_"+strconv.Itoa(c.im.unique)+"_c", t)
}

// setInput places v at input position i, padding with omitted inputs.
func (c *nodeConv) setInput(i int, v *graph.Value) {
	for len(c.inputs) <= i {
		c.inputs = append(c.inputs, nil)
	}
	c.inputs[i] = v
}

// takeInts removes an INTS attribute and returns it.
func (c *nodeConv) takeInts(name string) ([]int64, bool) {
	a, ok := c.attrs[name]
	if !ok {
		return nil, false
	}
	delete(c.attrs, name)
	return a.GetInts(), true
}

// takeAttr removes an attribute of any type and returns it.
func (c *nodeConv) takeAttr(name string) (*onnxpb.AttributeProto, bool) {
	a, ok := c.attrs[name]
	delete(c.attrs, name)
	return a, ok
}
