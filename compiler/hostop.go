package compiler

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Host ops: a node whose op is in the host op table (hostOpTable) runs as a vm host op
// (vm/hostop.go) instead of a kernel: one CallHost with the node's inputs (each read on
// the host: the VM copies a device tensor there) and its attributes (every attribute
// field of the op's struct, by its ONNX name), then a GetField per output. An output
// whose extents the graph does not know has fresh symbols; they are bound from the
// result's shape (ShapeOf, shape.dim) and extents the graph knows are checked against
// it (shape.expect), so a host op that disagrees with inference is an error, never a
// wrong launch. Later kernels read the results like any host value (a copy to their
// device).

// hostLowering is one entry of the host op table: the name in vm.StdHostOps and, when
// the op runs on the host only in some uses, the test for them (resolve maps a value
// of an inlined subgraph to the outer value it stands for).
type hostLowering struct {
	name string
	when func(n *graph.Node, resolve func(*graph.Value) *graph.Value) bool
}

// hostRow is one row of the host op table's source lists.
type hostRow struct {
	op graph.Op
	hl hostLowering
}

// hostOpTable lists the ops that run as host ops, by op (built on first use).
var hostOpTable = sync.OnceValue(buildHostOps)

func buildHostOps() *[graph.NumOps]hostLowering {
	var t [graph.NumOps]hostLowering
	rows := []hostRow{
		{graph.OpNonZero, hostLowering{name: vm.HostNonZero}},
		{graph.OpCompress, hostLowering{name: vm.HostCompress}},
		{graph.OpUnique, hostLowering{name: vm.HostUnique}},
		{graph.OpNonMaxSuppression, hostLowering{name: vm.HostNMS}},
		{graph.OpTopK, hostLowering{name: vm.HostTopK, when: runtimeInput(1)}},
		{graph.OpMaxUnpool, hostLowering{name: vm.HostMaxUnpool, when: runtimeInput(2)}},
		{graph.OpRandomNormal, hostLowering{name: vm.HostRandomNormal}},
		{graph.OpRandomUniform, hostLowering{name: vm.HostRandomUniform}},
		{graph.OpRandomNormalLike, hostLowering{name: vm.HostRandomNormalLike}},
		{graph.OpRandomUniformLike, hostLowering{name: vm.HostRandomUniformLike}},
		{graph.OpBernoulli, hostLowering{name: vm.HostBernoulli}},
		{graph.OpMultinomial, hostLowering{name: vm.HostMultinomial}},
	}
	for _, r := range append(rows, stringHostRows()...) {
		if t[r.op].name != "" {
			panic(fmt.Sprintf("BUG: host op %v listed twice", r.op))
		}
		t[r.op] = r.hl
	}
	return &t
}

// runtimeInput is the test of ops that run on the host when input i is present and
// not a constant (TopK's k, MaxUnpool's output_shape); otherwise they have kernels.
func runtimeInput(i int) func(*graph.Node, func(*graph.Value) *graph.Value) bool {
	return func(n *graph.Node, resolve func(*graph.Value) *graph.Value) bool {
		v := n.Input(i)
		return v != nil && resolve(v).Const == nil
	}
}

// hostOpFor returns the host op n runs as ("" when it runs as kernels).
func (c *compile) hostOpFor(n *graph.Node) string {
	if n.Op <= graph.OpInvalid || n.Op >= graph.NumOps {
		return ""
	}
	hl := hostOpTable()[n.Op]
	if hl.name == "" || (hl.when != nil && !hl.when(n, c.resolve)) {
		return ""
	}
	return hl.name
}

// lowerHostOp emits n as a CallHost of the host op name.
func (e *emitter) lowerHostOp(n *graph.Node, name string) error {
	attrs, err := hostAttrs(n)
	if err != nil {
		return err
	}
	call := vm.HostCall{Op: name, Attrs: attrs}
	var args []vm.Reg
	dense := true
	for i, v := range n.Inputs {
		if v == nil { // an omitted optional input
			dense = false
			continue
		}
		if v.Type.Kind != graph.KindTensor {
			return fmt.Errorf("%v: input %d has type %v; a host op takes tensors", n, i, v.Type)
		}
		r, err := e.read(v)
		if err != nil {
			return err
		}
		args = append(args, r)
		call.Slots = append(call.Slots, i)
	}
	if dense {
		call.Slots = nil
	}
	for _, r := range args {
		e.use(r)
	}
	tup := e.newReg()
	e.emit(vm.Instr{Op: vm.CallHost, Dst: tup, Args: args, Imm: int64(len(e.hostCalls)), Str: n.String()})
	e.hostCalls = append(e.hostCalls, call)
	for k, o := range n.Outputs {
		if o == nil {
			continue
		}
		r := e.newReg()
		e.emit(vm.Instr{Op: vm.GetField, Dst: r, Args: []vm.Reg{tup}, Imm: int64(k)})
		e.host[r] = true
		e.reg[o] = r
		if o.Type.Kind != graph.KindTensor || o.Type.UnknownRank {
			return fmt.Errorf("%v: output %d has type %v; a host op's outputs must have a known rank", n, k, o.Type)
		}
		if err := e.bindResultShape(n, o, r); err != nil {
			return err
		}
	}
	return nil
}

// hostAttrs encodes n's attribute struct: each field by its ONNX name (an absent list
// is left out); a tensor, subgraph or type attribute cannot be carried.
func hostAttrs(n *graph.Node) (vm.HostAttrs, error) {
	if n.Attrs == nil {
		return nil, nil
	}
	v := reflect.ValueOf(n.Attrs)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out vm.HostAttrs
	for _, f := range graph.AttrFields(v.Type()) {
		fv := v.Field(f.Index)
		at := vm.HostAttr{Name: f.Name}
		switch {
		case f.Type.Kind() == reflect.Int64:
			at.Kind, at.Ints = vm.AttrInts, []int64{fv.Int()}
		case f.Type.Kind() == reflect.Float32:
			at.Kind, at.Floats = vm.AttrFloats, []float64{fv.Float()}
		case f.Type.Kind() == reflect.String:
			at.Kind, at.Strings = vm.AttrStrings, []string{fv.String()}
		case f.Type == reflect.TypeFor[[]int64]():
			if fv.IsNil() {
				continue
			}
			at.Kind, at.Ints = vm.AttrInts, append([]int64{}, fv.Interface().([]int64)...)
		case f.Type == reflect.TypeFor[[]float32]():
			if fv.IsNil() {
				continue
			}
			at.Kind = vm.AttrFloats
			for _, x := range fv.Interface().([]float32) {
				at.Floats = append(at.Floats, float64(x))
			}
		case f.Type == reflect.TypeFor[[]string]():
			if fv.IsNil() {
				continue
			}
			at.Kind, at.Strings = vm.AttrStrings, append([]string{}, fv.Interface().([]string)...)
		case f.Type == reflect.TypeFor[*tensor.Tensor]():
			if fv.IsNil() {
				continue
			}
			return nil, fmt.Errorf("%v: attribute %s is a tensor, which a host op cannot take", n, f.Name)
		default:
			if fv.IsNil() {
				continue
			}
			return nil, fmt.Errorf("%v: attribute %s (%v) cannot be passed to a host op", n, f.Name, f.Type)
		}
		out = append(out, at)
	}
	return vm.SortAttrs(out), nil
}
