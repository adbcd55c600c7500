package vm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// Seq is an ONNX sequence in a register: an ordered list of tensors of one element
// type, each with its own shape. Its items are host values (the sequence builtins copy
// a device tensor to the host when it enters a sequence), so the memory plan never
// reuses memory a sequence still holds. A Seq is never changed once built: inserting or
// erasing makes a new one.
type Seq struct {
	Elem  tensor.DType
	Items []*Host
}

// Opt is an ONNX optional in a register: V is a *Host tensor, a *Seq, or nil when
// empty.
type Opt struct{ V Value }

func (*Seq) value() {}
func (*Opt) value() {}

// SeqValue is a sequence a caller passes to RunValues or gets back from it.
type SeqValue struct {
	Elem  tensor.DType
	Items []*tensor.Tensor
}

// OptValue is an optional a caller passes to RunValues or gets back from it: V is a
// *tensor.Tensor, a *SeqValue, or nil when empty.
type OptValue struct{ V any }

// IOKind says what an entry input or output is: a tensor, a sequence of tensors, or an
// optional holding either.
type IOKind uint8

const (
	IOTensor      IOKind = iota // a tensor (DType, Shape)
	IOSequence                  // seq<tensor>: DType and Shape describe every element
	IOOptional                  // opt<tensor>: DType and Shape describe the element
	IOOptSequence               // opt<seq<tensor>>: DType and Shape describe each item
	numIOKinds
)

var ioKindNames = [...]string{"tensor", "seq", "opt", "opt<seq>"}

func (k IOKind) String() string {
	if k < numIOKinds {
		return ioKindNames[k]
	}
	return "iokind(" + strconv.Itoa(int(k)) + ")"
}

// describeHost prints a host value passed to RunValues for errors.
func describeHost(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case *tensor.Tensor:
		if x == nil {
			return "nothing"
		}
		return fmt.Sprintf("%v%v", x.DType, x.Shape)
	case *SeqValue:
		if x == nil {
			return "nothing"
		}
		return fmt.Sprintf("seq<%v>(len %d)", x.Elem, len(x.Items))
	case *OptValue:
		if x == nil || x.V == nil {
			return "opt<empty>"
		}
		return "opt<" + describeHost(x.V) + ">"
	}
	return fmt.Sprintf("%T", v)
}

// elemString prints an element type and shape as TypeString does.
func elemString(dt tensor.DType, shape []int64, unknownRank bool) string {
	if unknownRank {
		return dt.String() + "[*]"
	}
	parts := make([]string, len(shape))
	for i, d := range shape {
		if d < 0 {
			parts[i] = "?"
		} else {
			parts[i] = strconv.FormatInt(d, 10)
		}
	}
	return dt.String() + "[" + strings.Join(parts, ",") + "]"
}

// elemMatches reports whether a tensor has the element type, rank and static extents
// of a signature entry.
func (io IOInfo) elemMatches(t *tensor.Tensor) bool {
	if t == nil || t.DType != io.DType {
		return false
	}
	if io.UnknownRank {
		return true
	}
	if len(t.Shape) != len(io.Shape) {
		return false
	}
	for k, d := range io.Shape {
		if d >= 0 && int64(t.Shape[k]) != d {
			return false
		}
	}
	return true
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// verifyKind checks a signature entry's kind against its shape: a known kind, a tensor
// of known rank, and no extents when the rank is unknown.
func (io IOInfo) verifyKind() error {
	switch {
	case io.Kind >= numIOKinds:
		return fmt.Errorf("kind %d", io.Kind)
	case io.Kind == IOTensor && io.UnknownRank:
		return fmt.Errorf("a tensor of unknown rank")
	case io.UnknownRank && len(io.Shape) != 0:
		return fmt.Errorf("%v of unknown rank with %d extents", io.Kind, len(io.Shape))
	}
	for _, d := range io.Shape {
		if d < -1 {
			return fmt.Errorf("extent %d", d)
		}
	}
	return nil
}
