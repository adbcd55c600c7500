package vm

import (
	"context"
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// RunValues is Run for entries that take or return sequences and optionals: each input
// and output is a *tensor.Tensor, a *SeqValue or an *OptValue, as the signature's Kind
// says (an optional input may also be given as its content or as nil, for empty).
// Inputs are checked against the signature: the kind, every element's type, rank and
// static extents, one element type per sequence (ErrInput naming the input).
func (m *VM) RunValues(ctx context.Context, inputs []any) ([]any, error) {
	return m.runValues(ctx, inputs, nil)
}

// tensorsOf is Run's result: every output must be a tensor.
func tensorsOf(outs []any, sig []IOInfo) ([]*tensor.Tensor, error) {
	res := make([]*tensor.Tensor, len(outs))
	for i, o := range outs {
		t, ok := o.(*tensor.Tensor)
		if !ok {
			name := fmt.Sprintf("%d", i)
			if i < len(sig) {
				name = fmt.Sprintf("%q", sig[i].Name)
			}
			return nil, fmt.Errorf("%w: output %s is %s; run the executable with RunValues", ErrRun, name, describeHost(o))
		}
		res[i] = t
	}
	return res, nil
}

// checkInputs compares inputs with the executable's signature, when it has one.
func (m *VM) checkInputs(inputs []any) error {
	if len(m.exe.Inputs) == 0 {
		return nil
	}
	for i, in := range inputs {
		want := m.exe.Inputs[i]
		if !want.accepts(in) {
			return fmt.Errorf("%w: input %q: got %s, the executable takes %s", ErrInput, want.Name, describeHost(in), want.TypeString())
		}
	}
	return nil
}

// accepts reports whether a host value fits a signature entry.
func (io IOInfo) accepts(v any) bool {
	switch io.Kind {
	case IOTensor:
		t, _ := v.(*tensor.Tensor)
		return t != nil && io.elemMatches(t)
	case IOSequence:
		return io.seqMatches(v)
	case IOOptional, IOOptSequence:
		if o, ok := v.(*OptValue); ok {
			if o == nil || o.V == nil {
				return true
			}
			v = o.V
		}
		if v == nil {
			return true
		}
		if io.Kind == IOOptSequence {
			return io.seqMatches(v)
		}
		t, _ := v.(*tensor.Tensor)
		return t != nil && io.elemMatches(t)
	}
	return false
}

// seqMatches: v is a sequence whose items all have the entry's element type (an empty
// sequence of any element type is accepted: it has no elements to disagree).
func (io IOInfo) seqMatches(v any) bool {
	s, _ := v.(*SeqValue)
	if s == nil {
		return false
	}
	for _, t := range s.Items {
		if !io.elemMatches(t) {
			return false
		}
	}
	return true
}

// input makes a checked host input a register value: a tensor uploaded to the CPU, a
// sequence or optional of host tensors.
// An empty sequence takes its element type from the signature (elem).
func (c *call) input(v any, name string, elem tensor.DType) (Value, error) {
	switch x := v.(type) {
	case *tensor.Tensor:
		if x.DType == tensor.String {
			// strings have no device layout: host ops read them where they are
			n := stringBytes(x)
			if err := c.reserve(n, name); err != nil {
				return nil, err
			}
			c.held += n
			return &Host{T: x}, nil
		}
		return c.bind(x, name)
	case *SeqValue:
		s, err := hostSeq(x, c.m.limits, name)
		if err == nil && len(s.Items) == 0 {
			s.Elem = elem
		}
		return s, err
	case *OptValue:
		if x == nil || x.V == nil {
			return &Opt{}, nil
		}
		inner, err := c.input(x.V, name, elem)
		if err != nil {
			return nil, err
		}
		if t, ok := inner.(*Tensor); ok { // an optional holds host values
			h, err := c.host(t)
			if err != nil {
				return nil, err
			}
			return &Opt{V: &Host{T: h}}, nil
		}
		return &Opt{V: inner}, nil
	case nil:
		return &Opt{}, nil
	}
	return nil, fmt.Errorf("BUG: %s is %T, which passed checkInputs", name, v)
}

func hostSeq(s *SeqValue, l Limits, name string) (*Seq, error) {
	out := &Seq{Elem: s.Elem}
	for i, t := range s.Items {
		if t == nil {
			return nil, fmt.Errorf("%w: %s: item %d is missing", ErrInput, name, i)
		}
		if i > 0 && t.DType != out.Elem {
			return nil, fmt.Errorf("%w: %s: items of types %v and %v", ErrInput, name, out.Elem, t.DType)
		}
		if n := int64(t.Len()) * int64(t.DType.Size()); n > l.TensorBytes {
			return nil, fmt.Errorf("%w: %w", ErrInput, l.TensorError(fmt.Sprintf("%s item %d", name, i), n))
		}
		out.Elem = t.DType
		out.Items = append(out.Items, &Host{T: t})
	}
	return out, nil
}

// output makes a result register's value a host value.
func (c *call) output(v Value) (any, error) {
	switch x := v.(type) {
	case *Seq:
		s := &SeqValue{Elem: x.Elem, Items: make([]*tensor.Tensor, len(x.Items))}
		for i, h := range x.Items {
			s.Items[i] = h.T
		}
		return s, nil
	case *Opt:
		if x.V == nil {
			return &OptValue{}, nil
		}
		inner, err := c.output(x.V)
		if err != nil {
			return nil, err
		}
		return &OptValue{V: inner}, nil
	}
	return c.host(v)
}
