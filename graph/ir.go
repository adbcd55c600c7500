package graph

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Module is a whole model: its entry function plus metadata.
type Module struct {
	Main *Func
	// Opsets is the operator-set import of the source model (domain → version), kept for
	// reports; IR semantics do not depend on it (the loader normalizes to opset-17 forms).
	Opsets map[string]int64
	// Producer is the exporter's name and version, when known.
	Producer string
	// Symbols lists the symbolic dims the module uses, in order of first appearance.
	Symbols []string
	// Defaults are the values of Main's parameters a caller may omit (ONNX graph inputs
	// with an initializer of the same name, IR version 4 and later), by parameter name.
	// A default is not a constant: the parameter stays a parameter, so a given value
	// replaces it; callers pass the default when the input is not given.
	Defaults map[string]*tensor.Tensor

	fresh int
	// defs are the derived symbols (Derive) in the order made; derived indexes them by
	// their expression
	defs    []SymbolDef
	derived map[string]string
	// symbolSet indexes Symbols for AddSymbol; rebuilt when Symbols was set from outside
	symbolSet map[string]bool
}

// Func is a graph: parameters, constants, nodes in topological order, and results.
// A subgraph (If/Loop/Scan body) has a Parent and may read values of enclosing Funcs.
type Func struct {
	Name    string
	Params  []*Value
	Consts  []*Value // initializers and folded Constant nodes; Value.Const is set
	Nodes   []*Node
	Results []*Value
	Parent  *Func
}

// Value is an SSA value: a parameter, a constant, or a node output.
type Value struct {
	Name  string
	Type  Type
	Def   *Node          // producing node; nil for params and constants
	Const *tensor.Tensor // non-nil for constants (never for a parameter: see Module.Defaults)
}

// Node applies an op to inputs. A nil entry in Inputs is an omitted optional input.
// Attrs is the op's attribute struct (a pointer, see OpInfo.Attrs) or nil.
type Node struct {
	Op      Op
	Name    string
	Inputs  []*Value
	Outputs []*Value
	Attrs   any
}

// Input returns input i, or nil if omitted or out of range.
func (n *Node) Input(i int) *Value {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return nil
}

// ConstInput returns the constant tensor behind input i, or nil.
func (n *Node) ConstInput(i int) *tensor.Tensor {
	if v := n.Input(i); v != nil {
		return v.Const
	}
	return nil
}

// String names the node for error messages: `Conv "conv1"`.
func (n *Node) String() string {
	if n.Name == "" {
		return n.Op.String()
	}
	return fmt.Sprintf("%v %q", n.Op, n.Name)
}

// FreshSymbol returns a new symbol name unique in the module ("_d1", "_d2", ...).
func (m *Module) FreshSymbol() Dim {
	m.fresh++
	name := fmt.Sprintf("_d%d", m.fresh)
	m.symbols()[name] = true
	m.Symbols = append(m.Symbols, name)
	return Sym(name)
}

// AddSymbol records a named symbol (idempotent), in constant time.
func (m *Module) AddSymbol(name string) Dim {
	set := m.symbols()
	if !set[name] {
		set[name] = true
		m.Symbols = append(m.Symbols, name)
	}
	return Sym(name)
}

// symbols returns the index of Symbols, rebuilding it when Symbols changed without it.
func (m *Module) symbols() map[string]bool {
	if m.symbolSet == nil || len(m.symbolSet) != len(m.Symbols) {
		m.symbolSet = make(map[string]bool, len(m.Symbols))
		for _, s := range m.Symbols {
			m.symbolSet[s] = true
		}
	}
	return m.symbolSet
}

// Funcs walks f and every nested subgraph (depth-first, f first).
func (f *Func) Funcs(visit func(*Func)) {
	visit(f)
	for _, n := range f.Nodes {
		for _, sub := range n.Subgraphs() {
			sub.Funcs(visit)
		}
	}
}

// NewConst makes a constant value (not yet attached to a Func).
func NewConst(name string, t *tensor.Tensor) *Value {
	shape := make([]Dim, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = Const(int64(d))
	}
	ty := TensorType(t.DType, shape...)
	if (t.DType == tensor.Int64 || t.DType == tensor.Int32) && len(t.Shape) <= 1 && t.Len() <= 16 {
		for _, v := range t.Int64s() {
			ty.Known = append(ty.Known, Const(v))
		}
	}
	return &Value{Name: name, Type: ty, Const: t}
}
