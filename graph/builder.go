package graph

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Builder appends nodes to a Func, running type inference for each node as it is added.
// The loader and tests build graphs through it.
type Builder struct {
	M    *Module
	F    *Func
	ic   *InferCtx
	next int
}

// NewBuilder starts a module whose main function is named name.
func NewBuilder(name string) *Builder {
	m := &Module{Opsets: map[string]int64{}}
	m.Main = &Func{Name: name}
	return &Builder{M: m, F: m.Main, ic: &InferCtx{M: m}}
}

// Sub returns a builder for a new subgraph whose parent is b's Func.
func (b *Builder) Sub(name string) *Builder {
	return &Builder{M: b.M, F: &Func{Name: name, Parent: b.F}, ic: b.ic}
}

// Param adds a parameter.
func (b *Builder) Param(name string, t Type) *Value {
	v := &Value{Name: name, Type: t}
	b.F.Params = append(b.F.Params, v)
	return v
}

// Const adds a constant.
func (b *Builder) Const(name string, t *tensor.Tensor) *Value {
	if name == "" {
		name = b.fresh("c")
	}
	v := NewConst(name, t)
	b.F.Consts = append(b.F.Consts, v)
	return v
}

func (b *Builder) fresh(prefix string) string {
	b.next++
	return fmt.Sprintf("%s%d", prefix, b.next)
}

// Node adds a node with the given attributes (nil: defaults) and numOut outputs, infers
// the output types, and returns the outputs. Output names are generated; use NodeNamed to
// give them.
func (b *Builder) Node(op Op, attrs any, numOut int, inputs ...*Value) ([]*Value, error) {
	names := make([]string, numOut)
	for i := range names {
		names[i] = b.fresh("t")
	}
	return b.NodeNamed(op, "", attrs, names, inputs...)
}

// NodeNamed is Node with a node name and output names.
func (b *Builder) NodeNamed(op Op, name string, attrs any, outNames []string, inputs ...*Value) ([]*Value, error) {
	info := op.Info()
	if info == nil {
		return nil, fmt.Errorf("%w: op %v is not supported", ErrInfer, op)
	}
	if attrs == nil {
		attrs = op.NewAttrs()
	}
	n := &Node{Op: op, Name: name, Inputs: inputs, Attrs: attrs}
	for _, on := range outNames {
		n.Outputs = append(n.Outputs, &Value{Name: on, Def: n})
	}
	if len(inputs) < info.MinIn || (info.MaxIn >= 0 && len(inputs) > info.MaxIn) {
		return nil, fmt.Errorf("%w: %v has %d inputs, want %d..%d", ErrInfer, n, len(inputs), info.MinIn, info.MaxIn)
	}
	if len(outNames) < info.MinOut || (info.MaxOut >= 0 && len(outNames) > info.MaxOut) {
		return nil, fmt.Errorf("%w: %v has %d outputs, want %d..%d", ErrInfer, n, len(outNames), info.MinOut, info.MaxOut)
	}
	types, err := InferNode(b.ic, n)
	if err != nil {
		return nil, err
	}
	for i, t := range types {
		n.Outputs[i].Type = t
	}
	b.F.Nodes = append(b.F.Nodes, n)
	return n.Outputs, nil
}

// Op1 adds a single-output node and returns its output.
func (b *Builder) Op1(op Op, attrs any, inputs ...*Value) (*Value, error) {
	outs, err := b.Node(op, attrs, 1, inputs...)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// Return sets the Func's results.
func (b *Builder) Return(results ...*Value) *Func {
	b.F.Results = results
	return b.F
}

// Module finishes the main function with the given results and verifies the module.
func (b *Builder) Module(results ...*Value) (*Module, error) {
	b.Return(results...)
	if err := Verify(b.M); err != nil {
		return nil, err
	}
	return b.M, nil
}
