package codegen

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
)

// ImageForm is how a dialect prints texture parameters (loopir.ScopeTexture) as RGBA
// float32 images: the parameter's type by access, the sampler of texel reads, and the
// read, lane select and write of a texel.
type ImageForm struct {
	// ReadOnly and WriteOnly are the parameter types of an image the kernel reads
	// (or neither reads nor writes) and of one it writes.
	ReadOnly, WriteOnly string
	// Sampler declares kiln_smp, the sampler of texel reads, at the top of a kernel
	// that reads an image.
	Sampler string
	// Read is the format of a texel read (the four lanes) from image, x and y (int64
	// expressions).
	Read string
	// Write is the format of the statement writing a texel: image, x, y, then the four
	// lanes.
	Write string
	// Lanes are the suffixes selecting lane 0..3 of a read texel.
	Lanes [loopir.TexelLanes]string
	// LaneHelper defines kiln_lane(texel, lane), the select of a lane known at run
	// time; the unit defines it when a kernel calls it.
	LaneHelper string
}

// openCLImages is OpenCL C 1.2's image2d_t: a read_only or write_only parameter, reads
// with read_imagef through an unnormalized, unaddressed, nearest sampler (a texel's
// exact value at integer coordinates), writes with write_imagef.
var openCLImages = &ImageForm{
	ReadOnly:  "__read_only image2d_t",
	WriteOnly: "__write_only image2d_t",
	Sampler:   "const sampler_t kiln_smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;",
	Read:      "read_imagef(%s, kiln_smp, (int2)((int)(%s), (int)(%s)))",
	Write:     "write_imagef(%s, (int2)((int)(%s), (int)(%s)), (float4)(%s, %s, %s, %s));",
	Lanes:     [loopir.TexelLanes]string{".s0", ".s1", ".s2", ".s3"},
	LaneHelper: `static inline float kiln_lane(float4 t, i64 l) { return l == 0 ? t.s0 : l == 1 ? t.s1 : l == 2 ? t.s2 : t.s3; }
`,
}

// imageAccess is how a kernel uses each of its texture parameters.
type imageAccess struct{ read, written map[*loopir.Buffer]bool }

// imageParams finds f's texture parameters' accesses, failing (ErrUnsupported) when
// the dialect has no images, a texture is accessed by element rather than by texel
// (loopir/passes.FlattenTextures did not run), or a kernel both reads and writes one.
func (e *cEmitter) imageParams(f *loopir.PrimFunc) imageAccess {
	acc := imageAccess{read: map[*loopir.Buffer]bool{}, written: map[*loopir.Buffer]bool{}}
	tex := false
	for _, p := range f.Params {
		tex = tex || p.Scope == loopir.ScopeTexture
	}
	if !tex {
		return acc
	}
	if e.d.Images == nil {
		e.fail("texture parameters (images)")
		return acc
	}
	element := func(b *loopir.Buffer) {
		if b.Scope == loopir.ScopeTexture {
			e.fail("texture %s is accessed by element, not by texel (run loopir/passes.FlattenTextures)", b.Name)
		}
	}
	loopir.MapStmt(f.Body, func(x loopir.Expr) loopir.Expr {
		switch x := x.(type) {
		case *loopir.TexRead:
			acc.read[x.Buf] = true
		case *loopir.Load:
			element(x.Buf)
		case *loopir.Address:
			element(x.Buf)
		}
		return x
	}, func(s loopir.Stmt) loopir.Stmt {
		switch s := s.(type) {
		case *loopir.TexWrite:
			acc.written[s.Buf] = true
		case *loopir.Store:
			element(s.Buf)
		}
		return nil
	})
	for _, p := range f.Params {
		if acc.read[p] && acc.written[p] {
			e.fail("texture %s is both read and written (an image is read-only or write-only to a kernel)", p.Name)
		}
	}
	return acc
}

// imageParam is the declaration of texture parameter p.
func (e *cEmitter) imageParam(p *loopir.Buffer, acc imageAccess) string {
	if e.d.Images == nil {
		return "void *" + e.ident(p, p.Name) // imageParams failed: never printed
	}
	t := e.d.Images.ReadOnly
	if acc.written[p] {
		t = e.d.Images.WriteOnly
	}
	return t + " " + e.ident(p, p.Name)
}

// texRead prints lane x.Lane of a texel read.
func (e *cEmitter) texRead(x *loopir.TexRead) string {
	if e.d.Images == nil {
		e.fail("texel read of %s", x.Buf.Name)
		return "0"
	}
	t := fmt.Sprintf(e.d.Images.Read, e.ident(x.Buf, x.Buf.Name), unwrap(e.expr(x.X)), unwrap(e.expr(x.Y)))
	if c, ok := x.Lane.(*loopir.IntImm); ok && c.V >= 0 && c.V < loopir.TexelLanes {
		return t + e.d.Images.Lanes[c.V]
	}
	e.intrins.lane = true
	return "kiln_lane(" + t + ", " + unwrap(e.expr(x.Lane)) + ")"
}

// texWrite prints a texel write.
func (e *cEmitter) texWrite(s *loopir.TexWrite, pad string) {
	if e.d.Images == nil {
		e.fail("texel write of %s", s.Buf.Name)
		return
	}
	args := []any{e.ident(s.Buf, s.Buf.Name), unwrap(e.expr(s.X)), unwrap(e.expr(s.Y))}
	for _, v := range s.Value {
		args = append(args, unwrap(e.expr(v)))
	}
	fmt.Fprintf(e.b, "%s%s\n", pad, fmt.Sprintf(e.d.Images.Write, args...))
}

// samplerDecl declares the sampler in a kernel that reads an image.
func (e *cEmitter) samplerDecl(acc imageAccess) {
	if len(acc.read) > 0 && e.d.Images != nil {
		e.b.WriteString("  " + strings.TrimSpace(e.d.Images.Sampler) + "\n")
	}
}
