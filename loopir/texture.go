package loopir

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// ScopeTexture is a kernel parameter held in an RGBA float32 image2d instead of a
// buffer: a 5-D float32 buffer whose last axis has extent TexelLanes (one texel's
// lanes) and whose first four axes map to the texel's (x, y) by the buffer's
// Packing (TexelOf). A kernel either reads such a parameter or writes it, never both
// (an image is read-only or write-only to a kernel), and accesses it only through
// TexRead and TexWrite once the texture flatten pass (loopir/passes) has run.
const ScopeTexture = "texture"

// TexelLanes is the number of float32 lanes of one texel (RGBA).
const TexelLanes = 4

// Packing is how a texture buffer's first four axes map to texel coordinates; it
// mirrors graph's packings of the same names.
type Packing uint8

const (
	// PackNCHW4c: [N, C/4, H, W, 4]; x = w, y = (n·C/4 + c/4)·H + h.
	PackNCHW4c Packing = iota
	// PackOIHW4o: [O/4, I, KH, KW, 4]; x = (i·KH + kh)·KW + kw, y = o/4.
	PackOIHW4o
	// PackNHWC4c: [N, H, W, C/4, 4]; x = w·C/4 + c/4, y = n·H + h.
	PackNHWC4c
	numPackings
)

func (p Packing) String() string {
	switch p {
	case PackNCHW4c:
		return "nchw4c"
	case PackOIHW4o:
		return "oihw4o"
	case PackNHWC4c:
		return "nhwc4c"
	}
	return fmt.Sprintf("packing(%d)", uint8(p))
}

// TexelOf is the texel (x, y) and lane of element idx (five indices) of texture
// buffer b.
func TexelOf(b *Buffer, idx []Expr) (x, y, lane Expr) {
	if len(idx) != 5 || len(b.Shape) != 5 {
		panic(fmt.Sprintf("BUG: TexelOf: texture %s of rank %d indexed with %d indices", b.Name, len(b.Shape), len(idx)))
	}
	s := b.Shape
	switch b.Packing {
	case PackNCHW4c:
		x = idx[3]
		y = Bin(Add, Bin(Mul, Bin(Add, Bin(Mul, idx[0], s[1]), idx[1]), s[2]), idx[2])
	case PackOIHW4o:
		x = Bin(Add, Bin(Mul, Bin(Add, Bin(Mul, idx[1], s[2]), idx[2]), s[3]), idx[3])
		y = idx[0]
	case PackNHWC4c:
		x = Bin(Add, Bin(Mul, idx[2], s[3]), idx[3])
		y = Bin(Add, Bin(Mul, idx[0], s[1]), idx[1])
	default:
		panic(fmt.Sprintf("BUG: TexelOf: texture %s has unknown packing %d", b.Name, uint8(b.Packing)))
	}
	return x, y, idx[4]
}

// ImageExtent is the width and height, in texels, of texture buffer b's image.
func ImageExtent(b *Buffer) (width, height Expr) {
	s := b.Shape
	switch b.Packing {
	case PackNCHW4c:
		return s[3], Bin(Mul, Bin(Mul, s[0], s[1]), s[2])
	case PackOIHW4o:
		return Bin(Mul, Bin(Mul, s[1], s[2]), s[3]), s[0]
	case PackNHWC4c:
		return Bin(Mul, s[2], s[3]), Bin(Mul, s[0], s[1])
	}
	panic(fmt.Sprintf("BUG: ImageExtent: texture %s has unknown packing %d", b.Name, uint8(b.Packing)))
}

// TexRead is lane Lane of the texel (X, Y) of a texture parameter: the image read
// gives the texel's four lanes and the lane select picks one (a float32).
type TexRead struct {
	Buf        *Buffer
	X, Y, Lane Expr
}

func (*TexRead) exprNode()           {}
func (*TexRead) DType() tensor.DType { return tensor.Float32 }

// TexWrite writes the texel (X, Y) of a texture parameter whole: Value holds its four
// lanes in order. One thread writes all four lanes of a texel (an image write is a
// texel write).
type TexWrite struct {
	Buf   *Buffer
	X, Y  Expr
	Value [TexelLanes]Expr
}

func (*TexWrite) stmtNode() {}

// checkTexture reports why b is not a valid texture parameter.
func checkTexture(b *Buffer) error {
	if b.DT != tensor.Float32 {
		return fmt.Errorf("texture %s holds %v, not float32", b.Name, b.DT)
	}
	if len(b.Shape) != 5 {
		return fmt.Errorf("texture %s has rank %d, not 5", b.Name, len(b.Shape))
	}
	if c, ok := b.Shape[4].(*IntImm); !ok || c.V != TexelLanes {
		return fmt.Errorf("texture %s has lane axis %s, not %d", b.Name, ExprString(b.Shape[4]), TexelLanes)
	}
	if b.Packing >= numPackings {
		return fmt.Errorf("texture %s has unknown packing %d", b.Name, uint8(b.Packing))
	}
	if b.Strides != nil {
		return fmt.Errorf("texture %s has strides", b.Name)
	}
	return nil
}

// textures checks the texture parameters (checkTexture) and that the kernel reads or
// writes each one, not both.
func (v *verifier) textures() error {
	read, written := map[*Buffer]bool{}, map[*Buffer]bool{}
	for _, p := range v.f.Params {
		if p.Scope != ScopeTexture {
			continue
		}
		if err := checkTexture(p); err != nil {
			return v.errf("%v", err)
		}
	}
	MapStmt(v.f.Body, func(e Expr) Expr {
		switch e := e.(type) {
		case *Load:
			read[e.Buf] = true
		case *TexRead:
			read[e.Buf] = true
		}
		return e
	}, func(s Stmt) Stmt {
		switch s := s.(type) {
		case *Store:
			written[s.Buf] = true
		case *TexWrite:
			written[s.Buf] = true
		}
		return nil
	})
	for _, p := range v.f.Params {
		if p.Scope == ScopeTexture && read[p] && written[p] {
			return v.errf("texture %s is both read and written (an image is read-only or write-only to a kernel)", p.Name)
		}
	}
	return nil
}

// texel checks a texel access: b is a texture parameter, the coordinates bound.
func (v *verifier) texel(b *Buffer, coords ...Expr) error {
	if !v.bufs[b] || b.Scope != ScopeTexture {
		return v.errf("texel access to %s, which is not a texture parameter", b.Name)
	}
	for _, c := range coords {
		if err := v.expr(c); err != nil {
			return err
		}
	}
	return nil
}
