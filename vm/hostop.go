package vm

import (
	"fmt"
	"math"
	"sort"

	"github.com/kilnrt/kiln/tensor"
)

// Host ops: ops that run on the host on whole tensors, called by CallHost. They are the
// ops no kernel can express well (a sort, a suppression loop, string processing) and
// the ops whose output extents depend on the values of their inputs (the op computes
// the values and the extents together; the compiled code binds the output's symbols
// from the result's shape). An executable lists each use in its host call table
// (Executable.HostCalls: the op's name, its attributes, which op inputs the
// instruction's arguments are); Load resolves the names in the VM's HostOps table and
// checks each call's attributes with the op's Check. CallHost copies its arguments to
// the host (a GPU tensor is synchronized and copied), runs the op with a HostCtx that
// counts what it allocates against the call's limits, and sets its register to the
// tuple of the outputs (host tensors; a kernel that reads one gets a copy on its
// device). A value a request gets wrong is an error wrapping ErrInput; a panic in an op
// is recovered into an error; both name the node (the instruction's Str).

// HostOp is one entry of the host op table.
type HostOp struct {
	// Outputs is how many tensors Run returns.
	Outputs int
	// Check validates a call's attributes at load (nil: any attributes are accepted).
	Check func(a HostAttrs) error
	// Run computes the outputs from the inputs (in[i] is nil for an absent optional
	// input). It allocates through h (Alloc, Reserve) and returns exactly Outputs
	// tensors.
	Run func(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error)
}

// HostOps is a table of host ops by name.
type HostOps map[string]HostOp

// StdHostOps is the table of host ops every VM may use (hostop_*.go).
func StdHostOps() HostOps {
	t := HostOps{
		HostNonZero:   {Outputs: 1, Run: hostNonZero},
		HostCompress:  {Outputs: 1, Run: hostCompress},
		HostUnique:    {Outputs: 4, Check: checkUnique, Run: hostUnique},
		HostNMS:       {Outputs: 1, Check: checkNMS, Run: hostNMS},
		HostTopK:      {Outputs: 2, Run: hostTopK},
		HostMaxUnpool: {Outputs: 1, Check: checkMaxUnpool, Run: hostMaxUnpool},
	}
	for name, op := range stringHostOps() {
		t[name] = op
	}
	for name, op := range randomHostOps() {
		t[name] = op
	}
	return t
}

// HostCall is one entry of an executable's host call table: the op (a name in the VM's
// HostOps), its attributes, and the op input each argument of the CallHost is.
type HostCall struct {
	Op    string
	Attrs HostAttrs
	// Slots lists the op input of each argument, ascending; inputs not listed are
	// absent. Empty: the arguments are inputs 0, 1, ...
	Slots []int
}

// maxHostSlots bounds a host call's input slots.
const maxHostSlots = 64

// AttrKind is the kind of a host op attribute's values.
type AttrKind uint8

const (
	AttrInts AttrKind = iota + 1
	AttrFloats
	AttrStrings
)

// HostAttr is one named attribute: a list of values of its Kind (a scalar is a list of
// one).
type HostAttr struct {
	Name    string
	Kind    AttrKind
	Ints    []int64
	Floats  []float64
	Strings []string
}

// HostAttrs are a host call's attributes, names ascending and distinct.
type HostAttrs []HostAttr

func (a HostAttrs) find(name string, kind AttrKind) *HostAttr {
	i := sort.Search(len(a), func(i int) bool { return a[i].Name >= name })
	if i < len(a) && a[i].Name == name && a[i].Kind == kind {
		return &a[i]
	}
	return nil
}

// Int is the integer attribute name, or def when it is absent (or not one integer).
func (a HostAttrs) Int(name string, def int64) int64 {
	if at := a.find(name, AttrInts); at != nil && len(at.Ints) == 1 {
		return at.Ints[0]
	}
	return def
}

// Ints is the integer list attribute name (nil when absent).
func (a HostAttrs) Ints(name string) []int64 {
	if at := a.find(name, AttrInts); at != nil {
		return at.Ints
	}
	return nil
}

// Float is the float attribute name, or def when it is absent.
func (a HostAttrs) Float(name string, def float64) float64 {
	if at := a.find(name, AttrFloats); at != nil && len(at.Floats) == 1 {
		return at.Floats[0]
	}
	return def
}

// Strings is the string list attribute name (nil when absent).
func (a HostAttrs) Strings(name string) []string {
	if at := a.find(name, AttrStrings); at != nil {
		return at.Strings
	}
	return nil
}

// SortAttrs orders attributes by name (the order Verify requires).
func SortAttrs(a HostAttrs) HostAttrs {
	sort.SliceStable(a, func(i, j int) bool { return a[i].Name < a[j].Name })
	return a
}

// verifyHostCalls checks the host call table's form: a name, attributes sorted and
// distinct with values of their kind only, slots ascending and bounded.
func (x *Executable) verifyHostCalls() error {
	for i, hc := range x.HostCalls {
		if hc.Op == "" {
			return fmt.Errorf("%w: host call %d has no op", ErrFormat, i)
		}
		for j, at := range hc.Attrs {
			if at.Name == "" || (j > 0 && hc.Attrs[j-1].Name >= at.Name) {
				return fmt.Errorf("%w: host call %d (%s): attribute %d %q is empty or out of order", ErrFormat, i, hc.Op, j, at.Name)
			}
			n := [...]int{AttrInts: len(at.Ints), AttrFloats: len(at.Floats), AttrStrings: len(at.Strings)}
			if at.Kind < AttrInts || at.Kind > AttrStrings || n[AttrInts]+n[AttrFloats]+n[AttrStrings] != n[at.Kind] {
				return fmt.Errorf("%w: host call %d (%s): attribute %q has kind %d or values of another kind", ErrFormat, i, hc.Op, at.Name, at.Kind)
			}
		}
		for j, s := range hc.Slots {
			if s < 0 || s >= maxHostSlots || (j > 0 && hc.Slots[j-1] >= s) {
				return fmt.Errorf("%w: host call %d (%s): slots %v are not ascending in [0, %d)", ErrFormat, i, hc.Op, hc.Slots, maxHostSlots)
			}
		}
	}
	return nil
}

// verifyCallHost checks a CallHost instruction against the table.
func (x *Executable) verifyCallHost(in *Instr) error {
	if in.Imm < 0 || in.Imm >= int64(len(x.HostCalls)) {
		return fmt.Errorf("host call %d of %d", in.Imm, len(x.HostCalls))
	}
	if s := x.HostCalls[in.Imm].Slots; len(s) != 0 && len(s) != len(in.Args) {
		return fmt.Errorf("%d arguments for %d slots of host call %d", len(in.Args), len(s), in.Imm)
	}
	return nil
}

// resolveHostOps binds the executable's host calls to table (nil: StdHostOps) and
// checks their attributes.
func (m *VM) resolveHostOps(table HostOps) error {
	if len(m.exe.HostCalls) == 0 {
		return nil
	}
	if table == nil {
		table = StdHostOps()
	}
	for i, hc := range m.exe.HostCalls {
		op, ok := table[hc.Op]
		if !ok || op.Run == nil {
			return fmt.Errorf("%w: host op %q (call %d) is not in this VM's table", ErrRun, hc.Op, i)
		}
		if op.Check != nil {
			if err := op.Check(hc.Attrs); err != nil {
				return fmt.Errorf("%w: host call %d (%s): %w", ErrFormat, i, hc.Op, err)
			}
		}
		m.hostOps = append(m.hostOps, op)
	}
	return nil
}

// callHost runs the host call of in on its arguments (host copies) and returns the
// tuple of its outputs.
func (c *call) callHost(in *Instr, args []*tensor.Tensor) (v Value, err error) {
	hc := &c.m.exe.HostCalls[in.Imm]
	op := c.m.hostOps[in.Imm]
	node := in.Str
	if node == "" {
		node = "host call " + hc.Op
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%s: host op %s: BUG: panic: %v", node, hc.Op, r)
		}
	}()
	inputs := args
	if len(hc.Slots) != 0 {
		inputs = make([]*tensor.Tensor, hc.Slots[len(hc.Slots)-1]+1)
		for i, s := range hc.Slots {
			inputs[s] = args[i]
		}
	}
	h := &HostCtx{limits: c.m.limits, what: node}
	h.left = c.m.limits.RequestBytes - c.held
	outs, err := op.Run(h, hc.Attrs, inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: host op %s: %w", node, hc.Op, err)
	}
	if len(outs) != op.Outputs {
		return nil, fmt.Errorf("%s: host op %s: BUG: %d outputs, want %d", node, hc.Op, len(outs), op.Outputs)
	}
	fields := make([]Value, len(outs))
	for i, t := range outs {
		if t == nil {
			return nil, fmt.Errorf("%s: host op %s: BUG: output %d is nil", node, hc.Op, i)
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("%s: host op %s: BUG: output %d: %v", node, hc.Op, i, err)
		}
		fields[i] = &Host{T: t}
	}
	return &Tuple{Fields: fields}, nil
}

// HostCtx is what a host op may allocate: each tensor within the call's TensorBytes,
// all of them together (with the scratch memory it reserves) within what the call may
// still hold of its RequestBytes. A refusal wraps ErrInput and ErrMemoryLimit.
type HostCtx struct {
	limits Limits
	what   string
	left   int64
}

// Reserve counts n bytes of scratch memory (index arrays, sort keys) before the op
// allocates them.
func (h *HostCtx) Reserve(n int64) error {
	if n < 0 {
		return fmt.Errorf("BUG: reserve %d bytes", n)
	}
	if n > h.limits.TensorBytes {
		return fmt.Errorf("%w: %w", ErrInput, h.limits.TensorError("the working memory of "+h.what, n))
	}
	if n > h.left {
		return fmt.Errorf("%w: %w", ErrInput, h.limits.RequestError(h.what, h.limits.RequestBytes-h.left+n))
	}
	h.left -= n
	return nil
}

// Alloc makes a zeroed host tensor of dt and shape, counted against the limits; an
// extent that is negative or overflows is an ErrInput.
func (h *HostCtx) Alloc(dt tensor.DType, shape ...int64) (*tensor.Tensor, error) {
	_, bytes, err := tensor.CheckedSize(dt, shape)
	if err != nil {
		return nil, fmt.Errorf("%w: output of %v%v: %w", ErrInput, dt, shape, err)
	}
	if bytes > math.MaxInt64/2 || bytes > h.limits.TensorBytes {
		return nil, fmt.Errorf("%w: %w", ErrInput, h.limits.TensorError("an output of "+h.what, bytes))
	}
	if err := h.Reserve(bytes); err != nil {
		return nil, err
	}
	s := make(tensor.Shape, len(shape))
	for i, d := range shape {
		s[i] = int(d)
	}
	return tensor.New(dt, s), nil
}
