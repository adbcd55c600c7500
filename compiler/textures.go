package compiler

import (
	"fmt"
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TextureScopes is annotate-scopes' policy for a GPU target whose kernels read and
// write textures as writes and reads say (the texture schedules' applicability): images
// up to the device's image2d limits (target.GPUFacts). Nil when the device has no
// images, so that every tensor stays global. A backend's Textures.Scopes returns it;
// Options.Recipe.TextureLimit lowers the limits for one compile.
func TextureScopes(t target.Target, writes func(n *graph.Node, p graph.Packing) bool, reads func(n *graph.Node, input int, p graph.Packing) bool) *passes.ScopePolicy {
	if t.GPU.ImageMaxWidth <= 0 || t.GPU.ImageMaxHeight <= 0 || writes == nil || reads == nil {
		return nil
	}
	return &passes.ScopePolicy{Writes: writes, Reads: reads,
		MaxWidth: int64(t.GPU.ImageMaxWidth), MaxHeight: int64(t.GPU.ImageMaxHeight)}
}

// textures is the backend's texture path when this compile takes it: the backend has
// one, the recipe does not turn it off, and the target's device has images.
func (c *compile) textures() *Textures {
	tx := c.be.Textures
	if tx == nil || c.opts.Recipe.NoTextures || c.t.GPU.ImageMaxWidth <= 0 || c.t.GPU.ImageMaxHeight <= 0 {
		return nil
	}
	return tx
}

// scopePolicy is the texture path's scope policy for the compile, its image limits
// lowered to the recipe's TextureLimit (nil: every tensor global).
func (c *compile) scopePolicy() (*passes.ScopePolicy, error) {
	limit := c.opts.Recipe.TextureLimit
	if limit < 0 {
		return nil, fmt.Errorf("texture limit %d: want a positive number of texels, or 0 for the device's", limit)
	}
	tx := c.textures()
	if tx == nil || tx.Scopes == nil {
		return nil, nil
	}
	pol := tx.Scopes(c.t, c.registry)
	if pol == nil || limit == 0 {
		return pol, nil
	}
	lowered := *pol
	lowered.MaxWidth, lowered.MaxHeight = min(pol.MaxWidth, limit), min(pol.MaxHeight, limit)
	return &lowered, nil
}

// image is an image2d's width and height in texels of four float32 lanes (the zero
// image: not an image, a buffer).
type image struct{ w, h int64 }

func (im image) isImage() bool { return im.w > 0 }

// bytes is the image's size: four float32 lanes per texel.
func (im image) bytes() int64 { return im.w * im.h * loopir.TexelLanes * 4 }

type imageCopyKey struct {
	src vm.Reg
	im  image
}

// imagesOf is the image of each parameter of a lowered kernel: its texture
// parameters' (static extents, loopir.ImageExtent), the zero image for buffers.
func imagesOf(f *loopir.PrimFunc) ([]image, error) {
	out := make([]image, len(f.Params))
	for i, b := range f.Params {
		if b.Scope != loopir.ScopeTexture {
			continue
		}
		w, h := loopir.ImageExtent(b)
		wi, ok1 := w.(*loopir.IntImm)
		hi, ok2 := h.(*loopir.IntImm)
		if !ok1 || !ok2 || wi.V < 1 || hi.V < 1 || b.DT != tensor.Float32 {
			return nil, fmt.Errorf("BUG: texture parameter %s of %s: image %v x %v of %v is not a static float32 image", b.Name, f.Name, w, h, b.DT)
		}
		out[i] = image{wi.V, hi.V}
	}
	return out, nil
}

// asImage returns a register holding r's tensor (value v, on device dev) as the
// kernel argument wants it: in image im, or in a buffer when im is the zero image.
// A tensor already so is r itself; else a DeviceCopy into a new image (Shape
// [width, height]) or a new buffer of the device, made once on the straight-line part.
func (e *emitter) asImage(v *graph.Value, r vm.Reg, im image, dev int) vm.Reg {
	if e.img[r] == im {
		return r
	}
	key := imageCopyKey{r, im}
	if d, ok := e.imgCopies[key]; ok {
		return d
	}
	d := e.newReg()
	e.use(r)
	in := vm.Instr{Op: vm.DeviceCopy, Dst: d, Args: []vm.Reg{r}, Device: dev, Str: "tensor " + strconv.Quote(v.Name)}
	if im.isImage() {
		in.Shape, in.DType = []int64{im.w, im.h}, tensor.Float32
		e.img[d] = im
	}
	e.emit(in)
	e.dev[d] = dev
	e.copiesMade++
	if e.depth == 0 {
		e.imgCopies[key] = d
	}
	return d
}

// allocImage allocates a tensor of a static shape in an image of its own on device
// dev, freed after its last use on the straight-line part like a run-time sized
// storage (images are not planned in the arenas: they cannot be sliced).
func (e *emitter) allocImage(dt tensor.DType, shape []int64, im image, what string, dev int) (vm.Reg, error) {
	bytes, err := tensor.CheckedBytes(dt, shape)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if dt != tensor.Float32 || bytes > im.bytes() {
		return 0, fmt.Errorf("BUG: %s: a %v%v tensor in a %dx%d image", what, dt, shape, im.w, im.h)
	}
	if im.bytes() > e.c.limits.TensorBytes {
		return 0, e.c.limits.TensorError(what, im.bytes())
	}
	s, r := e.newReg(), e.newReg()
	pc := e.emit(vm.Instr{Op: vm.AllocStorage, Dst: s, Imm: im.bytes(), Shape: []int64{im.w, im.h}, DType: tensor.Float32, Device: dev, Str: what})
	e.emit(vm.Instr{Op: vm.AllocTensor, Dst: r, Args: []vm.Reg{s}, DType: dt, Shape: shape, Str: what})
	e.dev[r], e.img[r] = dev, im
	if e.depth == 0 { // freed after its last use (killDynamic); inside control flow at the end
		rt := &root{alloc: pc, dev: dev, lastUse: pc + 1, storage: s, bytes: graph.Const(im.bytes()), what: what}
		e.dyn = append(e.dyn, rt)
		e.rootOf[r] = []*root{rt}
	}
	return r, nil
}

// placeTensor records where a kernel output of the straight-line part lives
// (Stats.Tensors): in image im, or in a buffer with annotate-scopes' reason when it
// considered a texture.
func (c *compile) placeTensor(v *graph.Value, dt tensor.DType, shape []int64, im image) {
	bytes, err := tensor.CheckedBytes(dt, shape)
	if err != nil {
		return // allocTensor refused it
	}
	p := TensorPlace{Name: v.Name, Bytes: bytes, Scope: graph.ScopeGlobal.String()}
	if im.isImage() {
		p.Scope, p.Image = graph.ScopeTexture.String(), fmt.Sprintf("%dx%d", im.w, im.h)
		c.res.Stats.TextureBytes += bytes
	} else if d, ok := c.decisions[v]; ok {
		p.Why = d.String()
		if d.Cause == passes.CauseTexture {
			p.Why = "its kernel writes a buffer (annotate-scopes chose " + d.String() + ")"
		}
	}
	c.res.Stats.Tensors = append(c.res.Stats.Tensors, p)
}
