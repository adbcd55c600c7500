package graph

import "fmt"

// Packing is how a texture tensor's elements map to the texels of an RGBA image2d
// (docs/ARCHITECTURE.md, "Memory scopes and layouts"). Every packing stores a 4-D tensor
// whose blocked axis (BlockAxis) is split in blocks of 4, one block per texel; the
// packings differ in which axes run along the image's rows and columns. The zero value
// is the activation packing, so a texture type without a packing is NCHW4c.
type Packing uint8

const (
	// PackNCHW4c ("texture", printed "@tex"): an activation stored [N, C/4, H, W, 4];
	// texel (x, y) = (w, (n·C/4 + c/4)·H + h), an image W wide and N·C/4·H high.
	PackNCHW4c Packing = iota
	// PackOIHW4o ("texture-weight", "@texw"): a convolution weight stored
	// [O/4, I, KH, KW, 4]; texel (x, y) = ((i·KH + kh)·KW + kw, o/4), an image I·KH·KW
	// wide and O/4 high.
	PackOIHW4o
	// PackNHWC4c ("texture-nhwc", "@texnhwc"): an activation stored [N, H, W, C/4, 4];
	// texel (x, y) = (w·C/4 + c/4, n·H + h), an image W·C/4 wide and N·H high.
	PackNHWC4c
	numPackings
)

// Packings lists every packing, in the order annotate-scopes prefers them on a tie.
func Packings() []Packing { return []Packing{PackNCHW4c, PackNHWC4c, PackOIHW4o} }

func (p Packing) String() string {
	switch p {
	case PackNCHW4c:
		return "texture"
	case PackOIHW4o:
		return "texture-weight"
	case PackNHWC4c:
		return "texture-nhwc"
	}
	return fmt.Sprintf("packing(%d)", uint8(p))
}

// suffix is the packing's mark in the text form of a type.
func (p Packing) suffix() string {
	switch p {
	case PackOIHW4o:
		return "@texw"
	case PackNHWC4c:
		return "@texnhwc"
	}
	return "@tex"
}

// BlockAxis is the axis split in blocks of 4 (one texel each): the output channels
// (0) of a weight, the channels (1) of an activation.
func (p Packing) BlockAxis() int {
	if p == PackOIHW4o {
		return 0
	}
	return 1
}

// TexelChannels is the number of elements of one texel (RGBA): every texture's Block.
const TexelChannels = 4

// checkTexture reports whether t can be stored in a texture of its packing: a 4-D
// tensor in blocks of 4 whose blocked axis is a known multiple of 4.
func checkTexture(t Type) error {
	p := t.Packing
	if p >= numPackings {
		return fmt.Errorf("unknown texture packing %d in %v", uint8(p), t)
	}
	if t.Block != TexelChannels {
		return fmt.Errorf("a texture holds blocks of %d channels (RGBA texels), not %v", TexelChannels, t)
	}
	if t.UnknownRank || len(t.Shape) != 4 {
		return fmt.Errorf("a %v is a 4-D tensor, not %v", p, t)
	}
	if c, ok := t.Shape[p.BlockAxis()].Value(); !ok || c%TexelChannels != 0 {
		return fmt.Errorf("a %v blocks axis %d, whose extent %v is not a multiple of %d", p, p.BlockAxis(), t.Shape[p.BlockAxis()], TexelChannels)
	}
	return nil
}

// ImageSize is the image2d, in texels, that holds a tensor of type t in texture memory
// with t's packing; ok is false when t is not a valid texture type (checkTexture), its
// shape is not static, or a side does not fit an int64. A global t is measured as if
// in a texture of its packing, which is how annotate-scopes compares the packings.
func ImageSize(t Type) (width, height int64, ok bool) {
	if t.Kind != KindTensor || checkTexture(t) != nil || !t.IsStatic() {
		return 0, 0, false
	}
	var d [4]int64
	for i := range d {
		d[i], _ = t.Shape[i].Value()
	}
	blocks := d[t.Packing.BlockAxis()] / TexelChannels
	var w, h Dim
	switch t.Packing {
	case PackNCHW4c:
		w, h = Const(d[3]), Const(d[0]).Mul(Const(blocks)).Mul(Const(d[2]))
	case PackOIHW4o:
		w, h = Const(d[1]).Mul(Const(d[2])).Mul(Const(d[3])), Const(blocks)
	case PackNHWC4c:
		w, h = Const(d[3]).Mul(Const(blocks)), Const(d[0]).Mul(Const(d[2]))
	}
	width, okw := w.Value()
	height, okh := h.Value()
	return width, height, okw && okh
}
