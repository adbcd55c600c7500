package intrin

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// MaxDepthwiseTile is the widest register tile of output columns a depthwise intrinsic
// is declared for (the depthwise strategy's tile_w knob goes up to it).
const MaxDepthwiseTile = 16

// DepthwiseF32 declares the depthwise convolution tile of tw output columns on vectors of
// lanes floats (regs vector registers): C[t, l] = Σ_kh Σ_kw A[t, kh, kw, l]·B[kh, kw,
// l] for t < tw, l < L, kh < KH, kw < KW (L, KH and KW run-time counts), C initialized to
// zero (the call owns the reduction's init). A is the padded input seen from the tile's
// origin: its strides along t and kw are the convolution's column stride and dilation
// times the lane count, so windows overlap; B is the tap's weights; C, A and B are
// contiguous along the lanes l. Per pass over one or two vectors of lanes (two where
// their 2·tw accumulators and two weight vectors fit the registers), the tw·nb sums
// live in registers from their zero to their one store, each tap's weights are loaded
// once for the tile and each input vector is a memory operand of its FMA; a lane count
// that is not a multiple of the vector takes single vectors, then a scalar tail. The
// taps accumulate in the order kh, kw (the reference's), each sum starting from zero.
func DepthwiseF32(isa string, lanes, regs, tw int) *loopir.TensorIntrin {
	if lanes <= 0 || tw <= 0 || tw > MaxDepthwiseTile {
		panic(fmt.Sprintf("BUG: DepthwiseF32(%s, %d, %d)", isa, lanes, tw))
	}
	name := fmt.Sprintf("kiln_dwconv_f32_%s_%d", isa, tw)
	return &loopir.TensorIntrin{
		Name:    name,
		Desc:    depthwiseDesc(name, int64(tw)),
		Unit:    [][2]int{{0, 1}, {1, 1}, {2, 1}}, // C, A and B contiguous along the lanes
		Partial: []bool{false, false, false, false},
		Impl:    map[string]string{"c": depthwiseC(name, lanes, regs, tw)},
	}
}

// depthwiseFamilies are the instruction sets a target runs the depthwise tile on, widest
// first: its own family's vectors, then the narrower families' (whose vectors every
// wider target has), for lane counts the wide vector does not divide.
func depthwiseFamilies(t target.Target) []family {
	switch familyFor(t).isa {
	case familyAVX512.isa:
		return []family{familyAVX512, familyAVX2, familyGeneric}
	case familyAVX2.isa:
		return []family{familyAVX2, familyGeneric}
	}
	return []family{familyGeneric}
}

// registers is the vector register count of a family's instruction set.
func (f family) registers() int {
	if f.isa == familyAVX512.isa {
		return 32
	}
	return 16
}

// DepthwiseTile is the depthwise intrinsic of a CPU target for tiles of tw columns over
// channel blocks of block lanes: the widest family vector of t that divides block; nil
// when none does (block not a multiple of 4) or tw is outside 1..MaxDepthwiseTile.
func DepthwiseTile(t target.Target, tw, block int64) *loopir.TensorIntrin {
	if tw <= 0 || tw > MaxDepthwiseTile || block <= 0 {
		return nil
	}
	for _, f := range depthwiseFamilies(t) {
		if block%int64(f.lanes) == 0 {
			return DepthwiseF32(f.isa, f.lanes, f.registers(), int(tw))
		}
	}
	return nil
}

// Depthwises lists every declared depthwise intrinsic.
func Depthwises() []*loopir.TensorIntrin {
	var out []*loopir.TensorIntrin
	for _, f := range []family{familyAVX512, familyAVX2, familyGeneric} {
		for tw := 1; tw <= MaxDepthwiseTile; tw++ {
			out = append(out, DepthwiseF32(f.isa, f.lanes, f.registers(), tw))
		}
	}
	return out
}

// depthwiseDesc: C [tw, L], A [tw, KH, KW, L], B [KH, KW, L] with loops t < tw, l < L,
// kh < KH, kw < KW; C is initialized to 0 before the first tap.
func depthwiseDesc(name string, tw int64) *loopir.PrimFunc {
	L, KH, KW := loopir.NewVar("L"), loopir.NewVar("KH"), loopir.NewVar("KW")
	c := &loopir.Buffer{Name: "C", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(tw), L}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(tw), KH, KW, L}, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: tensor.Float32, Shape: []loopir.Expr{KH, KW, L}, Scope: "global"}
	t, l, kh, kw := loopir.NewVar("t"), loopir.NewVar("l"), loopir.NewVar("kh"), loopir.NewVar("kw")
	vt, vl, vkh, vkw := loopir.NewVar("vt"), loopir.NewVar("vl"), loopir.NewVar("vkh"), loopir.NewVar("vkw")
	ctl := []loopir.Expr{vt, vl}
	aIdx := []loopir.Expr{vt, vkh, vkw, vl}
	bIdx := []loopir.Expr{vkh, vkw, vl}
	one := loopir.Int(1)
	blk := &loopir.Block{
		Name: "update",
		Iters: []loopir.IterVar{
			{Var: vt, Extent: loopir.Int(tw), Kind: loopir.Spatial},
			{Var: vl, Extent: L, Kind: loopir.Spatial},
			{Var: vkh, Extent: KH, Kind: loopir.Reduction},
			{Var: vkw, Extent: KW, Kind: loopir.Reduction},
		},
		Bindings: []loopir.Expr{t, l, kh, kw},
		Reads: []loopir.Region{
			{Buf: a, Ranges: [][2]loopir.Expr{{vt, one}, {vkh, one}, {vkw, one}, {vl, one}}},
			{Buf: b, Ranges: [][2]loopir.Expr{{vkh, one}, {vkw, one}, {vl, one}}},
		},
		Writes: []loopir.Region{{Buf: c, Ranges: [][2]loopir.Expr{{vt, one}, {vl, one}}}},
		Body: &loopir.Store{Buf: c, Index: ctl, Value: loopir.Bin(loopir.Add,
			&loopir.Load{Buf: c, Index: ctl},
			loopir.Bin(loopir.Mul, &loopir.Load{Buf: a, Index: aIdx}, &loopir.Load{Buf: b, Index: bIdx}))},
		Init: &loopir.Store{Buf: c, Index: ctl, Value: loopir.Float(0, tensor.Float32)},
	}
	body := &loopir.For{Var: t, Min: loopir.Int(0), Extent: loopir.Int(tw), Body: &loopir.For{Var: l, Min: loopir.Int(0), Extent: L,
		Body: &loopir.For{Var: kh, Min: loopir.Int(0), Extent: KH, Body: &loopir.For{Var: kw, Min: loopir.Int(0), Extent: KW, Body: blk}}}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Dims: []*loopir.Var{L, KH, KW}, Body: body}
}

// depthwiseC prints the implementation: passes of nb vectors of lanes (2 where 2·tw
// accumulators and 2 weight vectors fit in regs registers, then single vectors), then
// a scalar tail; straight-line accumulations (no pragmas), inlined into the caller so
// that constant strides and counts fold into addressing.
func depthwiseC(name string, lanes, regs, tw int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	(tileShape{lanes: lanes}).vectorTypes(w)
	vt := vectorType(lanes)
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    float *restrict c, i64 c_st, i64 c_sl, i64 c_skh, i64 c_skw,\n")
	w("    const float *restrict a, i64 a_st, i64 a_sl, i64 a_skh, i64 a_skw,\n")
	w("    const float *restrict b, i64 b_st, i64 b_sl, i64 b_skh, i64 b_skw,\n")
	w("    i64 nt, i64 nl, i64 nkh, i64 nkw) {\n")
	w("  (void)c_sl; (void)c_skh; (void)c_skw; (void)a_sl; (void)b_st; (void)b_sl; (void)nt;\n")
	w("  i64 l = 0;\n")
	passes := []int{1}
	if 2*tw+2 <= regs {
		passes = []int{2, 1}
	}
	for _, nb := range passes {
		w("  for (; l + %d <= nl; l += %d) {\n", nb*lanes, nb*lanes)
		for t := 0; t < tw; t++ {
			for v := 0; v < nb; v++ {
				w("    %s c%d_%d = (%s){0};\n", vt, t, v, vt)
			}
		}
		w("    for (i64 kh = 0; kh < nkh; ++kh) for (i64 kw = 0; kw < nkw; ++kw) {\n")
		w("      const float *restrict ap = a + kh * a_skh + kw * a_skw + l;\n")
		w("      const float *restrict bp = b + kh * b_skh + kw * b_skw + l;\n")
		for v := 0; v < nb; v++ {
			w("      const %s w%d = *(const %su *)(bp + %d);\n", vt, v, vt, v*lanes)
		}
		for t := 0; t < tw; t++ {
			w("     ")
			for v := 0; v < nb; v++ {
				w(" c%d_%d += *(const %su *)(ap + %d * a_st + %d) * w%d;", t, v, vt, t, v*lanes, v)
			}
			w("\n")
		}
		w("    }\n")
		for t := 0; t < tw; t++ {
			w("   ")
			for v := 0; v < nb; v++ {
				w(" *(%su *)(c + %d * c_st + l + %d) = c%d_%d;", vt, t, v*lanes, t, v)
			}
			w("\n")
		}
		w("  }\n")
	}
	w("  for (; l < nl; ++l) for (i64 t = 0; t < %d; ++t) {\n", tw)
	w("    float s = 0.0f;\n")
	w("    for (i64 kh = 0; kh < nkh; ++kh) for (i64 kw = 0; kw < nkw; ++kw)\n")
	w("      s += a[t * a_st + kh * a_skh + kw * a_skw + l] * b[kh * b_skh + kw * b_skw + l];\n")
	w("    c[t * c_st + l] = s;\n")
	w("  }\n")
	w("}\n")
	return b.String()
}
