package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Names of the sequence and optional builtins. Unlike the tensor builtins of a VM's
// table they are the VM's own (like BuiltinMemPlan): they take and return register
// values (*Seq, *Opt, tensors) rather than host copies of tensors. A position outside
// a sequence, elements of different element types, a split that does not cover its
// axis or an empty optional read is an ErrInput error naming the node (the
// instruction's Str).
const (
	// BuiltinSeqConstruct(t...) is the sequence of the tensors t.
	BuiltinSeqConstruct = "seq.construct"
	// BuiltinSeqEmpty() is an empty sequence of the instruction's DType.
	BuiltinSeqEmpty = "seq.empty"
	// BuiltinSeqAt(s, pos) is item pos of s (negative counts from the end).
	BuiltinSeqAt = "seq.at"
	// BuiltinSeqInsert(s, t[, pos]) is s with t inserted before pos (default: at the end).
	BuiltinSeqInsert = "seq.insert"
	// BuiltinSeqErase(s[, pos]) is s without item pos (default: the last).
	BuiltinSeqErase = "seq.erase"
	// BuiltinSeqLength(s[, n]) is the int64 scalar len(s); given n, a length other than
	// n is an error (SequenceMap's sequences must agree).
	BuiltinSeqLength = "seq.length"
	// BuiltinSeqSplit(t, axis, keepdims[, split]) is SplitToSequence.
	BuiltinSeqSplit = "seq.split"
	// BuiltinSeqConcat(s, axis, newaxis) is ConcatFromSequence.
	BuiltinSeqConcat = "seq.concat"
	// BuiltinOptSome(v) is the optional holding v; BuiltinOptNone() the empty one.
	BuiltinOptSome = "opt.some"
	BuiltinOptNone = "opt.none"
	// BuiltinOptHas(v) is the bool scalar "v holds a value" (true for a non-optional).
	BuiltinOptHas = "opt.has"
	// BuiltinOptGet(v) is the value an optional holds (v itself for a non-optional).
	BuiltinOptGet = "opt.get"
)

// valueBuiltin is a builtin over register values, called with between min and max
// arguments (max -1: any number).
type valueBuiltin struct {
	f        func(c *call, in *Instr, args []Value) (Value, error)
	min, max int
}

// valueBuiltins is the VM's table of sequence and optional builtins.
func valueBuiltins() map[string]valueBuiltin {
	return map[string]valueBuiltin{
		BuiltinSeqConstruct: {seqConstruct, 0, -1}, BuiltinSeqEmpty: {seqEmpty, 0, 0},
		BuiltinSeqAt: {seqAt, 2, 2}, BuiltinSeqInsert: {seqInsert, 2, 3},
		BuiltinSeqErase: {seqErase, 1, 2}, BuiltinSeqLength: {seqLength, 1, 2},
		BuiltinSeqSplit: {seqSplit, 3, 4}, BuiltinSeqConcat: {seqConcat, 3, 3},
		BuiltinOptSome: {optSome, 1, 1}, BuiltinOptNone: {optNone, 0, 0},
		BuiltinOptHas: {optHas, 0, 1}, BuiltinOptGet: {optGet, 1, 1},
	}
}

// callValue runs a sequence or optional builtin on its registers' values.
func (c *call) callValue(b valueBuiltin, in *Instr, args []Value) (Value, error) {
	if len(args) < b.min || b.max >= 0 && len(args) > b.max {
		return nil, fmt.Errorf("%d arguments", len(args))
	}
	return b.f(c, in, args)
}

// hostItem is a tensor value as a sequence item: a host copy of a device tensor.
func (c *call) hostItem(v Value) (*Host, error) {
	if h, ok := v.(*Host); ok {
		return h, nil
	}
	t, err := c.host(v)
	if err != nil {
		return nil, err
	}
	return &Host{T: t}, nil
}

func seqArg(v Value) (*Seq, error) {
	s, ok := v.(*Seq)
	if !ok {
		return nil, fmt.Errorf("%T is not a sequence", v)
	}
	return s, nil
}

// intArg reads an integer scalar argument.
func (c *call) intArg(v Value, what string) (int64, error) {
	t, err := c.host(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if t.Len() != 1 || !t.DType.IsInt() {
		return 0, fmt.Errorf("%w: %s is %v%v, want an integer scalar", ErrInput, what, t.DType, t.Shape)
	}
	return t.Int64s()[0], nil
}

// position normalizes a sequence position (negative counts from the end); insert
// allows the length itself.
func position(p int64, length int, insert bool) (int, error) {
	limit := int64(length)
	if insert {
		limit++
	}
	q := p
	if q < 0 {
		q += int64(length)
	}
	if q < 0 || q >= limit {
		return 0, fmt.Errorf("%w: position %d is out of range for a sequence of length %d", ErrInput, p, length)
	}
	return int(q), nil
}

func seqConstruct(c *call, _ *Instr, args []Value) (Value, error) {
	s := &Seq{}
	for i, v := range args {
		h, err := c.hostItem(v)
		if err != nil {
			return nil, err
		}
		if i > 0 && h.T.DType != s.Elem {
			return nil, fmt.Errorf("%w: elements of types %v and %v", ErrInput, s.Elem, h.T.DType)
		}
		s.Elem = h.T.DType
		s.Items = append(s.Items, h)
	}
	return s, nil
}

func seqEmpty(_ *call, in *Instr, _ []Value) (Value, error) {
	if !in.DType.Valid() {
		return nil, fmt.Errorf("an empty sequence of element type %d", in.DType)
	}
	return &Seq{Elem: in.DType}, nil
}

func seqAt(c *call, _ *Instr, args []Value) (Value, error) {
	s, err := seqArg(args[0])
	if err != nil {
		return nil, err
	}
	p, err := c.intArg(args[1], "the position")
	if err != nil {
		return nil, err
	}
	i, err := position(p, len(s.Items), false)
	if err != nil {
		return nil, err
	}
	return s.Items[i], nil
}

func seqInsert(c *call, _ *Instr, args []Value) (Value, error) {
	s, err := seqArg(args[0])
	if err != nil {
		return nil, err
	}
	h, err := c.hostItem(args[1])
	if err != nil {
		return nil, err
	}
	if len(s.Items) > 0 && h.T.DType != s.Elem {
		return nil, fmt.Errorf("%w: inserting a %v tensor into a sequence of %v", ErrInput, h.T.DType, s.Elem)
	}
	at := len(s.Items)
	if len(args) > 2 {
		p, err := c.intArg(args[2], "the position")
		if err != nil {
			return nil, err
		}
		if at, err = position(p, len(s.Items), true); err != nil {
			return nil, err
		}
	}
	items := make([]*Host, 0, len(s.Items)+1)
	items = append(append(append(items, s.Items[:at]...), h), s.Items[at:]...)
	return &Seq{Elem: h.T.DType, Items: items}, nil
}

func seqErase(c *call, _ *Instr, args []Value) (Value, error) {
	s, err := seqArg(args[0])
	if err != nil {
		return nil, err
	}
	if len(s.Items) == 0 {
		return nil, fmt.Errorf("%w: erasing from an empty sequence", ErrInput)
	}
	at := len(s.Items) - 1
	if len(args) > 1 {
		p, err := c.intArg(args[1], "the position")
		if err != nil {
			return nil, err
		}
		if at, err = position(p, len(s.Items), false); err != nil {
			return nil, err
		}
	}
	items := append(append([]*Host{}, s.Items[:at]...), s.Items[at+1:]...)
	return &Seq{Elem: s.Elem, Items: items}, nil
}

func seqLength(c *call, _ *Instr, args []Value) (Value, error) {
	s, err := seqArg(args[0])
	if err != nil {
		return nil, err
	}
	if len(args) > 1 { // the length another sequence of the node has
		want, err := c.intArg(args[1], "the expected length")
		if err != nil {
			return nil, err
		}
		if int64(len(s.Items)) != want {
			return nil, fmt.Errorf("%w: sequences of lengths %d and %d", ErrInput, want, len(s.Items))
		}
	}
	return &Host{T: tensor.Scalar(int64(len(s.Items)))}, nil
}

func optSome(c *call, _ *Instr, args []Value) (Value, error) {
	switch v := args[0].(type) {
	case *Seq:
		return &Opt{V: v}, nil
	case *Opt:
		return v, nil
	}
	h, err := c.hostItem(args[0])
	if err != nil {
		return nil, err
	}
	return &Opt{V: h}, nil
}

func optNone(*call, *Instr, []Value) (Value, error) { return &Opt{}, nil }

func optHas(_ *call, _ *Instr, args []Value) (Value, error) {
	has := len(args) > 0
	if has {
		if o, ok := args[0].(*Opt); ok {
			has = o.V != nil
		}
	}
	return &Host{T: tensor.Scalar(has)}, nil
}

func optGet(_ *call, _ *Instr, args []Value) (Value, error) {
	o, ok := args[0].(*Opt)
	if !ok {
		return args[0], nil
	}
	if o.V == nil {
		return nil, fmt.Errorf("%w: the optional is empty", ErrInput)
	}
	return o.V, nil
}

// stepValue is CallBuiltin of a sequence or optional builtin: errors name the node.
func (c *call) stepValue(vb valueBuiltin, in *Instr, arg func(int) (Value, error), set func(Value) (int, Value, error)) (int, Value, error) {
	args := make([]Value, len(in.Args))
	for i := range args {
		v, err := arg(i)
		if err != nil {
			return 0, nil, err
		}
		args[i] = v
	}
	out, err := c.callValue(vb, in, args)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: builtin %s: %w", what(in), c.m.exe.Builtins[in.Imm], err)
	}
	return set(out)
}
