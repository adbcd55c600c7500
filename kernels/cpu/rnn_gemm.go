package cpu

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// The products of the recurrent kernels: the input projection, a GEMM over all time
// steps, and each step's recurrent product h·Rᵀ, a GEMM with as many rows as the batch.
// With a vector unit declared (float32), both run on register-tile micro-kernels
// (intrin.GemmF32 called as loopir.IntrinCall), on tiles wide enough that independent
// accumulators hide the FMA latency, over weights packed in column panels: the panel of
// a tile holds its columns for every k contiguously, so each step streams the weights
// once, in order. Without one they run as plain loops over the transposed weights (one
// panel as wide as all columns).

// RNNVector describes the vector unit the micro-kernels are declared for; Lanes 0 means
// plain loops (which the C compiler vectorizes) instead of micro-kernels.
type RNNVector struct {
	ISA       string // the name part of the intrinsics ("avx2", "avx512", "generic")
	Lanes     int    // float32 lanes of a vector register
	Registers int    // vector registers
}

// rnnTile is one column panel of a packed weight: columns [col, col+width) of the
// transposed weight ([K, G·H]), stored [K][width] from element off of the direction's
// block; nv vectors per row is the micro-kernel it feeds (0 for plain loops).
type rnnTile struct {
	col, width, off int64
	nv              int
}

// rnnPanels is the packed layout of one weight: its tiles in order, K rows each.
type rnnPanels struct {
	k     int64
	tiles []rnnTile
}

// shape is the micro-kernel for a product with rows rows: up to 6 rows and as many
// vectors per row (at most 8) as the register file holds accumulators for.
func (v RNNVector) shape(rows int64) (mr, nv int) {
	mr = int(min(rows, 6))
	return mr, min(max((v.Registers-4)/mr, 1), 8)
}

// panels lays out a weight with k rows whose columns are split into segments (products
// over column ranges), for products of rows rows. Each segment gets tiles of the widest
// kernel, then one narrower tile of whole vectors, then a partial vector.
func (v RNNVector) panels(rows, k int64, segs [][2]int64) rnnPanels {
	p := rnnPanels{k: k}
	add := func(col, width int64, nv int) {
		off := int64(0)
		if n := len(p.tiles); n > 0 {
			last := p.tiles[n-1]
			off = last.off + k*last.width
		}
		p.tiles = append(p.tiles, rnnTile{col: col, width: width, off: off, nv: nv})
	}
	for _, sg := range segs {
		if v.Lanes <= 0 {
			add(sg[0], sg[1]-sg[0], 0)
			continue
		}
		_, nv := v.shape(rows)
		lanes := int64(v.Lanes)
		c := sg[0]
		for nr := int64(nv) * lanes; c+nr <= sg[1]; c += nr {
			add(c, nr, nv)
		}
		if w := (sg[1] - c) / lanes; w > 0 {
			add(c, w*lanes, int(w))
			c += w * lanes
		}
		if c < sg[1] {
			add(c, sg[1]-c, 1)
		}
	}
	return p
}

// name describes the layout (Param.Layout: packed copies are shared by this name).
func (p rnnPanels) name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rnn-panels-k%d", p.k)
	for _, t := range p.tiles {
		fmt.Fprintf(&b, "-%d", t.width)
	}
	return b.String()
}

// size is the number of elements of one direction's block.
func (p rnnPanels) size() int64 {
	last := p.tiles[len(p.tiles)-1]
	return last.off + p.k*last.width
}

// pack rewrites a [D, G·H, K] weight (W or R as ONNX stores them) into panels, one block
// per direction: the host-side Prepack of a constant weight.
func (p rnnPanels) pack(t *tensor.Tensor) (*tensor.Tensor, error) {
	if len(t.Shape) != 3 || int64(t.Shape[2]) != p.k {
		return nil, fmt.Errorf("rnn weight prepack: shape %v, want [D, G·H, %d]", t.Shape, p.k)
	}
	d, cols, k := t.Shape[0], t.Shape[1], t.Shape[2]
	if int64(cols*k) != p.size() {
		return nil, fmt.Errorf("rnn weight prepack: shape %v does not fit %d packed elements", t.Shape, p.size())
	}
	v := t.Float64s()
	out := make([]float64, len(v))
	for dd := 0; dd < d; dd++ {
		src, dst := v[dd*cols*k:], out[dd*cols*k:]
		for _, tl := range p.tiles {
			for kk := int64(0); kk < p.k; kk++ {
				for j := int64(0); j < tl.width; j++ {
					dst[tl.off+kk*tl.width+j] = src[(tl.col+j)*p.k+kk]
				}
			}
		}
	}
	return tensor.FromFloat64s(t.DType, tensor.Shape{d, cols * k}, out), nil
}

// packLoops is the same rewrite in the kernel, for one direction of a weight that
// arrives at run time: dst[off + kk·width + j] = at(col + j, kk).
func (p rnnPanels) packLoops(dst *loopir.Buffer, at func(g, k loopir.Expr) loopir.Expr) loopir.Stmt {
	var s loopir.Seq
	for _, tl := range p.tiles {
		s = append(s, rnnLoop("j", 0, tl.width, loopir.Serial, func(j loopir.Expr) loopir.Stmt {
			return rnnLoop("kk", 0, p.k, loopir.Serial, func(kk loopir.Expr) loopir.Stmt {
				idx := loopir.Bin(loopir.Add, loopir.Int(tl.off), loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, kk, loopir.Int(tl.width)), j))
				return rnnSt(dst, at(loopir.Bin(loopir.Add, loopir.Int(tl.col), j), kk), idx)
			})
		}))
	}
	return s
}

// rnnOperand is a matrix inside a buffer: element (row, col) is at index at(row, col),
// rows are stride elements apart and columns are contiguous.
type rnnOperand struct {
	buf    *loopir.Buffer
	at     func(row, col loopir.Expr) []loopir.Expr
	stride loopir.Expr
}

func (o rnnOperand) addr(row, col loopir.Expr) loopir.Expr {
	return &loopir.Address{Buf: o.buf, Index: o.at(row, col)}
}

// microGemm emits c[·, col] (=|+=) a·panel for every tile of w whose columns lie in
// [c0, c1) (zero chooses the storing form), rows rows and w.k terms. at(off) indexes
// element off of this direction's packed block. Runs of equal full tiles become one
// loop of kind (parallel for a large projection). A symbolic row count takes
// microGemmSym.
func (v RNNVector) microGemm(zero bool, rowsE loopir.Expr, c, a rnnOperand, w rnnPanels, c0, c1 int64, packed *loopir.Buffer, at func(off loopir.Expr) []loopir.Expr, kind loopir.ForKind) loopir.Stmt {
	rows, static := rnnConst(rowsE)
	if !static {
		return w.runs(c0, c1, kind, func(tl rnnTile, col, off loopir.Expr) loopir.Stmt {
			return v.microGemmSym(zero, rowsE, c, a, w, tl, col, off, packed, at)
		})
	}
	mr, _ := v.shape(rows)
	call := func(tl rnnTile, col, off loopir.Expr) loopir.Stmt {
		g := v.kernel(mr, tl.nv)
		in := g.Update
		if zero {
			in = g.Init
		}
		return rnnLoop("it", 0, (rows+int64(mr)-1)/int64(mr), loopir.Serial, func(it loopir.Expr) loopir.Stmt {
			row := loopir.Bin(loopir.Mul, it, loopir.Int(int64(mr)))
			m := loopir.Bin(loopir.Min, loopir.Int(int64(mr)), loopir.Bin(loopir.Sub, loopir.Int(rows), row))
			return &loopir.IntrinCall{Intrin: in, Args: []loopir.Expr{
				c.addr(row, col), c.stride, loopir.Int(1), loopir.Int(0),
				a.addr(row, loopir.Int(0)), a.stride, loopir.Int(0), loopir.Int(1),
				&loopir.Address{Buf: packed, Index: at(off)}, loopir.Int(0), loopir.Int(1), loopir.Int(tl.width),
				m, loopir.Int(tl.width), loopir.Int(w.k),
			}}
		})
	}
	return w.runs(c0, c1, kind, call)
}

// runs emits call(tile, first column, packed offset) for every tile whose columns lie
// in [c0, c1), a run of equal tiles as one loop of kind.
func (w rnnPanels) runs(c0, c1 int64, kind loopir.ForKind, call func(tl rnnTile, col, off loopir.Expr) loopir.Stmt) loopir.Stmt {
	var out loopir.Seq
	var tiles []rnnTile
	for _, tl := range w.tiles {
		if tl.col >= c0 && tl.col+tl.width <= c1 {
			tiles = append(tiles, tl)
		}
	}
	for i := 0; i < len(tiles); {
		tl, n := tiles[i], 1
		for i+n < len(tiles) && tiles[i+n].width == tl.width && tiles[i+n].nv == tl.nv {
			n++
		}
		if n == 1 {
			out = append(out, call(tl, loopir.Int(tl.col), loopir.Int(tl.off)))
		} else {
			out = append(out, rnnLoop("jt", 0, int64(n), kind, func(jt loopir.Expr) loopir.Stmt {
				col := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, jt, loopir.Int(tl.width)), loopir.Int(tl.col))
				off := loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, jt, loopir.Int(tl.width*w.k)), loopir.Int(tl.off))
				return call(tl, col, off)
			}))
		}
		i += n
	}
	return out
}

// kernel declares the micro-kernel of mr rows and nv vectors per row.
func (v RNNVector) kernel(mr, nv int) intrin.Gemm {
	return intrin.GemmF32(v.ISA, v.Lanes, mr, nv)
}
