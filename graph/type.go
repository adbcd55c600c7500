package graph

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// Kind says what a Value holds.
type Kind uint8

const (
	KindTensor   Kind = iota // a dense tensor (the common case)
	KindSequence             // an ONNX sequence of tensors; Elem is the element type
	KindOptional             // an ONNX optional; Elem is the contained type
)

// Type is the static type of a Value.
//
// For tensors, Shape holds one Dim per axis; Rank < 0 in UnknownRank form means the rank is
// not known statically (only data-dependent ops produce that). Known, when non-nil, holds the
// symbolic element values of a small 0-D/1-D integer tensor (shape arithmetic such as
// Shape → Gather → Concat), so that Reshape/Expand can infer symbolic output shapes.
type Type struct {
	Kind        Kind
	DType       tensor.DType
	Shape       []Dim
	UnknownRank bool
	Known       []Dim
	Elem        *Type
	// Block, when non-zero, says how a 4-D NCHW tensor is stored: channels in blocks of
	// Block, as [N, C/Block, H, W, Block] (NCHW{Block}c). The value (Shape, element
	// order in the ONNX sense) is unchanged; only kernels see the storage order. Set by
	// the alter-layout pass, printed as "@c16".
	Block int64
	// Scope is the memory the value lives in (ScopeGlobal unless annotate-scopes puts it
	// in a texture), and Packing, for a texture, how its elements map to the image's
	// texels (zero for a global value); printed as "@tex", "@texw" or "@texnhwc".
	Scope   MemScope
	Packing Packing
}

// MemScope is where a tensor is stored on its device (docs/ARCHITECTURE.md, "Memory
// scopes and layouts"). A texture is an RGBA image2d whose texel is one block of 4
// channels (the type's Block is 4); the type's Packing says which axes run along the
// image's rows and columns (ImageSize).
type MemScope uint8

const (
	ScopeGlobal  MemScope = iota // a plain buffer in device memory
	ScopeTexture                 // an image2d (OpenCL), one RGBA texel per 4-channel block
)

func (s MemScope) String() string {
	if s == ScopeTexture {
		return "texture"
	}
	return "global"
}

// TensorType builds a tensor type.
func TensorType(dt tensor.DType, shape ...Dim) Type {
	return Type{Kind: KindTensor, DType: dt, Shape: shape}
}

// StaticShape builds Dims from constant extents.
func StaticShape(ext ...int64) []Dim {
	out := make([]Dim, len(ext))
	for i, e := range ext {
		out[i] = Const(e)
	}
	return out
}

// Rank is the number of axes, or -1 when unknown.
func (t Type) Rank() int {
	if t.UnknownRank {
		return -1
	}
	return len(t.Shape)
}

// IsStatic reports whether every extent is a constant.
func (t Type) IsStatic() bool {
	if t.UnknownRank {
		return false
	}
	for _, d := range t.Shape {
		if !d.IsConst() {
			return false
		}
	}
	return true
}

// ConstShape returns the shape when it is fully static.
func (t Type) ConstShape() (tensor.Shape, bool) {
	if !t.IsStatic() {
		return nil, false
	}
	s := make(tensor.Shape, len(t.Shape))
	for i, d := range t.Shape {
		s[i] = int(d.c)
	}
	return s, true
}

// Subst is t with Dim.Subst applied to its extents and known values (an element type's
// too).
func (t Type) Subst(s map[string]Dim) Type {
	if len(s) == 0 {
		return t
	}
	if t.Elem != nil {
		e := t.Elem.Subst(s)
		t.Elem = &e
	}
	sub := func(ds []Dim) []Dim {
		if ds == nil {
			return nil
		}
		out := make([]Dim, len(ds))
		for i, d := range ds {
			out[i] = d.Subst(s)
		}
		return out
	}
	t.Shape, t.Known = sub(t.Shape), sub(t.Known)
	return t
}

// Equal compares kind, dtype and shape (not Known).
func (t Type) Equal(o Type) bool {
	if t.Kind != o.Kind || t.DType != o.DType || t.UnknownRank != o.UnknownRank || len(t.Shape) != len(o.Shape) {
		return false
	}
	for i := range t.Shape {
		if !t.Shape[i].Equal(o.Shape[i]) {
			return false
		}
	}
	if t.Block != o.Block || t.Scope != o.Scope || t.Packing != o.Packing {
		return false
	}
	if (t.Elem == nil) != (o.Elem == nil) {
		return false
	}
	return t.Elem == nil || t.Elem.Equal(*o.Elem)
}

// String prints "f32[batch,3,224,224]", "i64[]" (scalar), "f32[*]" (unknown rank),
// "seq<f32[2]>", "opt<f32[2]>". Known values print after the shape as "{b,s}".
func (t Type) String() string {
	switch t.Kind {
	case KindSequence:
		return "seq<" + elemString(t.Elem) + ">"
	case KindOptional:
		return "opt<" + elemString(t.Elem) + ">"
	}
	var b strings.Builder
	b.WriteString(t.DType.String())
	if t.UnknownRank {
		b.WriteString("[*]")
	} else {
		b.WriteString(dimsString(t.Shape))
	}
	if t.Known != nil {
		parts := make([]string, len(t.Known))
		for i, d := range t.Known {
			parts[i] = d.String()
		}
		b.WriteString("{" + strings.Join(parts, ",") + "}")
	}
	if t.Block != 0 {
		fmt.Fprintf(&b, "@c%d", t.Block)
	}
	if t.Scope == ScopeTexture {
		b.WriteString(t.Packing.suffix())
	}
	return b.String()
}

func elemString(e *Type) string {
	if e == nil {
		return "?"
	}
	return e.String()
}

func dimsString(ds []Dim) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// ParseType parses the String form.
func ParseType(s string) (Type, error) {
	s = strings.TrimSpace(s)
	for _, w := range []struct {
		prefix string
		kind   Kind
	}{{"seq<", KindSequence}, {"opt<", KindOptional}} {
		if strings.HasPrefix(s, w.prefix) && strings.HasSuffix(s, ">") {
			inner := s[len(w.prefix) : len(s)-1]
			t := Type{Kind: w.kind}
			if inner != "?" {
				e, err := ParseType(inner)
				if err != nil {
					return Type{}, err
				}
				t.Elem = &e
			}
			return t, nil
		}
	}
	lb := strings.IndexByte(s, '[')
	rb := strings.IndexByte(s, ']')
	if lb < 0 || rb < lb {
		return Type{}, fmt.Errorf("bad type %q", s)
	}
	dt, err := tensor.ParseDType(s[:lb])
	if err != nil {
		return Type{}, err
	}
	t := Type{Kind: KindTensor, DType: dt}
	body := s[lb+1 : rb]
	switch body {
	case "*":
		t.UnknownRank = true
	case "":
		t.Shape = []Dim{}
	default:
		if t.Shape, err = parseDims(body); err != nil {
			return Type{}, err
		}
	}
	rest := s[rb+1:]
	for _, p := range Packings() {
		if r, ok := strings.CutSuffix(rest, p.suffix()); ok {
			t.Scope, t.Packing, rest = ScopeTexture, p, r
			break
		}
	}
	if at := strings.LastIndex(rest, "@c"); at >= 0 {
		blk, err := strconv.ParseInt(rest[at+2:], 10, 64)
		if err != nil || blk <= 0 {
			return Type{}, fmt.Errorf("bad layout in type %q", s)
		}
		t.Block, rest = blk, rest[:at]
	}
	if strings.HasPrefix(rest, "{") && strings.HasSuffix(rest, "}") {
		if rest == "{}" {
			t.Known = []Dim{}
		} else if t.Known, err = parseDims(rest[1 : len(rest)-1]); err != nil {
			return Type{}, err
		}
	} else if rest != "" {
		return Type{}, fmt.Errorf("bad type %q", s)
	}
	return t, nil
}

func parseDims(body string) ([]Dim, error) {
	var out []Dim
	for _, p := range strings.Split(body, ",") {
		d, err := ParseDim(p)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
