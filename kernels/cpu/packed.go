package cpu

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
)

// MatMulPacked is C[m, n] = Σ_k A[m, k]·B[k, n] with B first repacked into column panels
// Bp[⌈N/nr⌉, K, nr] (zero past N): each panel row is nr contiguous values, the layout an
// outer-product micro-kernel streams. With mr > 0, A is repacked too, into row panels
// Ap[⌈M/mr⌉, K, mr], so that a tile's rows sit side by side instead of a row stride apart
// (row strides that are multiples of 4 KiB alias in the L1 cache). It returns the product;
// the packing stages are blocks "packed_a" and "packed_b".
func MatMulPacked(a, b *te.Tensor, mr, nr int64) *te.Tensor {
	m, n, k := a.Shape[0], b.Shape[1], b.Shape[0]
	dt := b.Buffer().DT
	pack := func(name string, rows, extent loopir.Expr, tile int64, at func(k, x loopir.Expr) loopir.Expr) *te.Tensor {
		panels := div(add(extent, i64(tile-1)), i64(tile))
		return te.Compute(name, []loopir.Expr{panels, k, i64(tile)}, func(i []loopir.Expr) loopir.Expr {
			x := add(mul(i[0], i64(tile)), i[2])
			safe := loopir.Bin(loopir.Min, x, sub(extent, i64(1)))
			return te.Select(loopir.Bin(loopir.LT, x, extent), at(i[1], safe), loopir.Float(0, dt))
		})
	}
	packedB := pack("packed_b", k, n, nr, func(k, x loopir.Expr) loopir.Expr { return b.At(k, x) })
	aAt := func(i, r loopir.Expr) loopir.Expr { return a.At(i, r) }
	if mr > 0 {
		packedA := pack("packed_a", k, m, mr, func(k, x loopir.Expr) loopir.Expr { return a.At(x, k) })
		aAt = func(i, r loopir.Expr) loopir.Expr {
			return packedA.At(div(i, i64(mr)), r, loopir.Bin(loopir.Mod, i, i64(mr)))
		}
	}
	r := te.RAxis("k", a.Shape[1])
	return te.Compute("matmul", []loopir.Expr{m, n}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(aAt(i[0], r.Var), packedB.At(div(i[1], i64(nr)), r.Var, loopir.Bin(loopir.Mod, i[1], i64(nr)))), r)
	})
}

// Conv2DNCHWc is a convolution in blocked layouts, the form the CPU strategy tensorizes:
// x is [N, C/cb, H, W, cb], w is [M/mb, C/cb, KH, KW·cb, mb] (kernel column kw and input
// channel ic merged into kw·cb + ic), the result [N, M/mb, OH, OW, mb]. A padded copy of x
// with its last two axes merged, [N, C/cb, H+2p, (W+2p)·cb], makes the merged reduction
// axis contiguous: output column ow reads columns ow·s·cb + r for r < KW·cb. Horizontal
// dilation must be 1 (it would break that contiguity); groups are not supported here.
func Conv2DNCHWc(x, w *te.Tensor, a kernels.Conv2DAttrs) (pad, y *te.Tensor, err error) {
	if len(x.Shape) != 5 || len(w.Shape) != 5 {
		return nil, nil, fmt.Errorf("conv2d NCHWc: want 5-D data and weights, got %d-D and %d-D", len(x.Shape), len(w.Shape))
	}
	var e [8]int64
	for i, d := range []loopir.Expr{x.Shape[1], x.Shape[2], x.Shape[3], x.Shape[4], w.Shape[0], w.Shape[2], w.Shape[3], w.Shape[4]} {
		c, ok := d.(*loopir.IntImm)
		if !ok {
			return nil, nil, fmt.Errorf("conv2d NCHWc: channel and spatial extents must be static")
		}
		e[i] = c.V
	}
	cbs, h, wd, cb, mbs, kh, kwcb, mb := e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]
	if max(a.Groups, 1) != 1 || a.Dilations[1] != 1 {
		return nil, nil, fmt.Errorf("conv2d NCHWc: groups %d and horizontal dilation %d are not supported (want 1 and 1)", a.Groups, a.Dilations[1])
	}
	if c, ok := w.Shape[1].(*loopir.IntImm); !ok || c.V != cbs || kwcb%cb != 0 {
		return nil, nil, fmt.Errorf("conv2d NCHWc: weights %v do not fit data with %d blocks of %d channels", w.Shape, cbs, cb)
	}
	kw := kwcb / cb
	ph, pw := a.Pads[0], a.Pads[1]
	oh := (h+2*ph-a.Dilations[0]*(kh-1)-1)/a.Strides[0] + 1
	ow := (wd+2*pw-(kw-1)-1)/a.Strides[1] + 1
	dt := x.Buffer().DT
	pad = te.Compute("pad", []loopir.Expr{x.Shape[0], i64(cbs), i64(h + 2*ph), i64((wd + 2*pw) * cb)}, func(i []loopir.Expr) loopir.Expr {
		yy, xx, ci := sub(i[2], i64(ph)), sub(div(i[3], i64(cb)), i64(pw)), loopir.Bin(loopir.Mod, i[3], i64(cb))
		cond := loopir.Bin(loopir.And, inside(yy, i64(h)), inside(xx, i64(wd)))
		safeY := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, yy, i64(h-1)), i64(0))
		safeX := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, xx, i64(wd-1)), i64(0))
		return te.Select(cond, x.At(i[0], i[1], safeY, safeX, ci), loopir.Float(0, dt))
	})
	icb, ry, rr := te.RAxis("icb", i64(cbs)), te.RAxis("ry", i64(kh)), te.RAxis("rr", i64(kwcb))
	y = te.Compute("conv", []loopir.Expr{x.Shape[0], i64(mbs), i64(oh), i64(ow), i64(mb)}, func(i []loopir.Expr) loopir.Expr {
		row := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
		col := add(mul(i[3], i64(a.Strides[1]*cb)), rr.Var)
		return te.Sum(te.Mul(pad.At(i[0], icb.Var, row, col), w.At(i[1], icb.Var, ry.Var, rr.Var, i[4])), icb, ry, rr)
	})
	return pad, y, nil
}

// PackNCHWc reorders NCHW data into [N, C/cb, H, W, cb] (C divisible by cb).
func PackNCHWc(v []float32, n, c, h, w, cb int) []float32 {
	out := make([]float32, len(v))
	for b := 0; b < n; b++ {
		for ch := 0; ch < c; ch++ {
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					out[(((b*(c/cb)+ch/cb)*h+y)*w+x)*cb+ch%cb] = v[((b*c+ch)*h+y)*w+x]
				}
			}
		}
	}
	return out
}

// PackWeightsNCHWc reorders OIHW weights into [M/mb, C/cb, KH, KW·cb, mb].
func PackWeightsNCHWc(v []float32, m, c, kh, kw, cb, mb int) []float32 {
	out := make([]float32, len(v))
	for o := 0; o < m; o++ {
		for i := 0; i < c; i++ {
			for y := 0; y < kh; y++ {
				for x := 0; x < kw; x++ {
					out[((((o/mb)*(c/cb)+i/cb)*kh+y)*kw*cb+x*cb+i%cb)*mb+o%mb] = v[((o*c+i)*kh+y)*kw+x]
				}
			}
		}
	}
	return out
}

// UnpackNCHWc reorders [N, C/cb, H, W, cb] data back into NCHW.
func UnpackNCHWc(v []float32, n, c, h, w, cb int) []float32 {
	out := make([]float32, len(v))
	for b := 0; b < n; b++ {
		for ch := 0; ch < c; ch++ {
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					out[((b*c+ch)*h+y)*w+x] = v[(((b*(c/cb)+ch/cb)*h+y)*w+x)*cb+ch%cb]
				}
			}
		}
	}
	return out
}

// gemmKnobs declare the packed matmul's GemmConfig as knobs around d: KC (reduction
// block), MC (row block in tiles), parallel (0 or 1), few_row_blocks (the row-block
// count up to which pairs of panel and row block are the parallel loop), symbolic_mc
// (MC for a symbolic row count) and wide_b_mib (the size of B, in MiB, from which a
// symbolic row count runs panel and row block pairs in parallel; 0: never).
func gemmKnobs(d GemmConfig) []kernels.Knob {
	b := map[bool]int64{false: 0, true: 1}
	return []kernels.Knob{
		{Name: "KC", Values: []int64{64, 128, 192, 256, 384, 512}, Default: d.KC},
		{Name: "MC", Values: []int64{1, 2, 4, 8, 16, 32}, Default: d.MC},
		{Name: "parallel", Values: []int64{0, 1}, Default: b[d.Parallel]},
		{Name: "few_row_blocks", Values: []int64{0, 2, 4, 8, 16}, Default: d.FewRowBlocks},
		{Name: "symbolic_mc", Values: []int64{1, 2, 4, 8, 16}, Default: d.SymbolicMC},
		{Name: "wide_b_mib", Values: []int64{0, 2, 8, 32}, Default: d.WideB >> 20},
	}
}

// gemmConfig is the configuration a resolved assignment of gemmKnobs names.
func gemmConfig(k kernels.Knobs) GemmConfig {
	return GemmConfig{KC: k["KC"], MC: k["MC"], Parallel: k["parallel"] != 0, FewRowBlocks: k["few_row_blocks"], SymbolicMC: k["symbolic_mc"], WideB: k["wide_b_mib"] << 20}
}

// batchedKnobs declare what a batched product's schedule reads of GemmConfig (the
// batched matmul, Winograd's tile products): KC and parallel.
func batchedKnobs(d GemmConfig) []kernels.Knob {
	all := gemmKnobs(d)
	return []kernels.Knob{all[0], all[2]}
}

// withKnobs makes the strategies of table tunable: those that take a GemmConfig (the
// packed matmuls: gemmKnobs; the batched matmul and the Winograd convolution: KC,
// parallel), the blocked convolution (convKnobs) and the pointwise one (parallel).
func withKnobs(reg *kernels.Registry, table map[graph.Op][]kernels.Strategy) {
	with := func(build func(*kernels.Registry, *graph.Node, []kernels.Input, []kernels.Epilogue, target.Target, GemmConfig) (*kernels.Impl, error)) func(*graph.Node, []kernels.Input, []kernels.Epilogue, target.Target, kernels.Knobs) (*kernels.Impl, error) {
		return func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, k kernels.Knobs) (*kernels.Impl, error) {
			full := kernels.Knobs{}
			for _, kn := range gemmKnobs(DefaultGemm) {
				full[kn.Name] = kn.Default // the knobs a batched schedule does not declare
			}
			for name, v := range k {
				full[name] = v
			}
			return build(reg, n, in, epi, t, gemmConfig(full))
		}
	}
	for _, op := range []graph.Op{graph.OpMatMul, graph.OpGemm, graph.OpConv} {
		for i := range table[op] {
			st := &table[op][i]
			switch {
			case strings.HasSuffix(st.Name, "-packed-tensorized"):
				st.Knobs, st.Tuned = gemmKnobs(DefaultGemm), with(buildMatMulPackedWith)
			case st.Name == "matmul-batched-tensorized":
				st.Knobs, st.Tuned = batchedKnobs(DefaultGemm), with(buildMatMulBatchedWith)
			case st.Name == "conv2d-winograd-tensorized":
				st.Knobs, st.Tuned = batchedKnobs(DefaultGemm), with(buildConvWinogradWith)
			case st.Name == "conv2d-pointwise-tensorized":
				st.Knobs = pointwiseKnobs()
				st.Tuned = func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, k kernels.Knobs) (*kernels.Impl, error) {
					return buildConvPointwiseWith(reg, n, in, epi, t, k["parallel"] != 0)
				}
			case st.Name == "conv2d-nchwc-tensorized":
				st.Knobs = convKnobs(DefaultConv)
				st.Tuned = func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, k kernels.Knobs) (*kernels.Impl, error) {
					return buildConvBlockedWith(reg, n, in, epi, t, ConvConfig{Parallel: k["parallel"] != 0, SplitK: k["split_k"] != 0, TilesOuter: k["tiles_outer"] != 0, RowsInner: k["rows_inner"] != 0})
				}
			}
		}
	}
}
