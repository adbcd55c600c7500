package vm

import (
	"fmt"
	"math"
	"sort"

	"github.com/kilnrt/kiln/tensor"
)

// NonMaxSuppression on the host: per batch and class, the boxes whose score is above
// score_threshold (when given) in order of decreasing score (stable), each kept unless
// its IoU with a box kept before is above iou_threshold, at most
// max_output_boxes_per_class of them (absent or not positive: none). The output lists
// (batch, class, box) per kept box. Boxes or thresholds that are NaN are an ErrInput;
// the output never has more rows than batches × classes × boxes, so a huge
// max_output_boxes_per_class allocates nothing more.

func checkNMS(a HostAttrs) error {
	if c := a.Int("center_point_box", 0); c != 0 && c != 1 {
		return fmt.Errorf("center_point_box is %d, want 0 or 1", c)
	}
	return nil
}

// nmsScalar is the first value of the optional input i (def when absent or empty).
func nmsScalar(in []*tensor.Tensor, i int, def float64) (float64, bool) {
	if i < len(in) && in[i] != nil && in[i].Len() > 0 {
		return in[i].Float64s()[0], true
	}
	return def, false
}

func hostNMS(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	boxes, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	scores, err := hostInput(in, 1)
	if err != nil {
		return nil, err
	}
	if len(boxes.Shape) != 3 || boxes.Shape[2] != 4 || len(scores.Shape) != 3 ||
		scores.Shape[0] != boxes.Shape[0] || scores.Shape[2] != boxes.Shape[1] {
		return nil, fmt.Errorf("%w: boxes %v and scores %v do not fit ([batches, boxes, 4] and [batches, classes, boxes])", ErrInput, boxes.Shape, scores.Shape)
	}
	if !boxes.DType.IsFloat() || !scores.DType.IsFloat() {
		return nil, fmt.Errorf("%w: boxes %v and scores %v are not floating point", ErrInput, boxes.DType, scores.DType)
	}
	maxOut := int64(0)
	if i := 2; i < len(in) && in[i] != nil && in[i].Len() > 0 {
		if !in[i].DType.IsInt() {
			return nil, fmt.Errorf("%w: max_output_boxes_per_class is %v, want an integer", ErrInput, in[i].DType)
		}
		maxOut = max(in[i].Int64s()[0], 0)
	}
	iouTh, _ := nmsScalar(in, 3, 0)
	scoreTh, hasScoreTh := nmsScalar(in, 4, 0)
	if math.IsNaN(iouTh) || math.IsNaN(scoreTh) {
		return nil, fmt.Errorf("%w: iou_threshold %v or score_threshold %v is NaN", ErrInput, iouTh, scoreTh)
	}
	if err := h.Reserve(int64(boxes.Len()+scores.Len())*8 + int64(scores.Len())*16); err != nil {
		return nil, err
	}
	bv, sv := boxes.Float64s(), scores.Float64s()
	for i, v := range bv {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: box coordinate %d is %v", ErrInput, i, v)
		}
	}
	for i, v := range sv {
		if math.IsNaN(v) {
			return nil, fmt.Errorf("%w: score %d is NaN", ErrInput, i)
		}
	}
	center := a.Int("center_point_box", 0) != 0
	nb, nc, ns := scores.Shape[0], scores.Shape[1], scores.Shape[2]
	// each box's rectangle and the kept ones
	if err := h.Reserve(int64(ns) * 2 * nmsRectBytes); err != nil {
		return nil, err
	}
	// the grid, one for every class in turn, holds each kept box once per cell it
	// covers; where the limits refuse it, every class compares all pairs (the same
	// answer, slower)
	var grid *nmsGrid
	if iouTh >= 0 && ns > nmsGridMin && h.Reserve(int64(ns)*(nmsGridSide*nmsGridSide+1)*4) == nil {
		grid = &nmsGrid{}
	}
	var sel []int64
	cand := make([]int, 0, ns)
	rects := make([]nmsRect, ns)
	var kept []nmsRect
	for b := 0; b < nb; b++ {
		for i := range rects {
			rects[i] = newNMSRect(bv[(b*ns+i)*4:(b*ns+i)*4+4], center)
		}
		for c := 0; c < nc; c++ {
			sc := sv[(b*nc+c)*ns : (b*nc+c+1)*ns]
			cand = cand[:0]
			for i := 0; i < ns; i++ {
				if !hasScoreTh || sc[i] > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(p, q int) bool { return sc[cand[p]] > sc[cand[q]] })
			kept = kept[:0]
			indexed := grid != nil && len(cand) > nmsGridMin
			if indexed {
				grid.reset(rects, cand)
			}
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				r, ok := rects[i], true
				if indexed {
					ok = !grid.suppressed(&r, kept, iouTh)
				} else {
					for k := range kept {
						if r.iou(&kept[k]) > iouTh {
							ok = false
							break
						}
					}
				}
				if ok {
					if indexed {
						grid.add(&r, len(kept))
					}
					kept = append(kept, r)
					sel = append(sel, int64(b), int64(c), int64(i))
				}
			}
		}
	}
	out, err := h.Alloc(tensor.Int64, int64(len(sel)/3), 3)
	if err != nil {
		return nil, err
	}
	copy(out.Data.([]int64), sel)
	return []*tensor.Tensor{out}, nil
}

// nmsRect is a box's corners (y1 ≤ y2, x1 ≤ x2) and area, computed once per box: the
// suppression loop compares each candidate with every box kept before it (SSDLite's
// 27000 boxes against thousands kept), so nothing is recomputed per pair.
type nmsRect struct{ y1, x1, y2, x2, area float64 }

// nmsRectBytes is an nmsRect's size, for the host op's memory count.
const nmsRectBytes = 40

// newNMSRect reads a box as [y1, x1, y2, x2] (any two opposite corners) or, with
// center, [x_center, y_center, width, height].
func newNMSRect(p []float64, center bool) nmsRect {
	var r nmsRect
	if center {
		r = nmsRect{p[1] - p[3]/2, p[0] - p[2]/2, p[1] + p[3]/2, p[0] + p[2]/2, 0}
	} else {
		r = nmsRect{math.Min(p[0], p[2]), math.Min(p[1], p[3]), math.Max(p[0], p[2]), math.Max(p[1], p[3]), 0}
	}
	r.area = (r.y2 - r.y1) * (r.x2 - r.x1)
	return r
}

// iou is the intersection over union of two boxes, 0 when the union is empty. The
// coordinates are finite (hostNMS refuses NaN and infinities), so the builtin min and
// max, inlined, give math.Min's and math.Max's answers.
func (r *nmsRect) iou(o *nmsRect) float64 {
	h := min(r.y2, o.y2) - max(r.y1, o.y1)
	w := min(r.x2, o.x2) - max(r.x1, o.x1)
	if h <= 0 || w <= 0 {
		return 0
	}
	inter := h * w
	union := r.area + o.area - inter
	if union <= 0 {
		return 0
	}
	return inter / union
}

// nmsGridMin: above this many boxes a grid is reserved, and above this many candidates
// a class's kept boxes are indexed by it.
const nmsGridMin = 256

// nmsGridSide is the grid's cells per side.
const nmsGridSide = 16

// nmsGrid indexes the kept boxes by the cells of a uniform grid over the candidates'
// bounding rectangle that each box covers. With iou_threshold ≥ 0 only a kept box that
// intersects a candidate (with positive area) can suppress it, and two such boxes share
// the cell of a point they both hold (a box's cells run from its first corner's to its
// second's, and the cell of a coordinate is monotone in it), so looking only at the
// kept boxes of the candidate's cells decides exactly as comparing with all of them,
// in time that grows with the boxes near it rather than with all kept so far.
type nmsGrid struct {
	y0, x0, cy, cx float64
	cells          [nmsGridSide * nmsGridSide][]int32
	seen           []int32 // per kept box, the last candidate (its count) that looked at it
	looks          int32
}

// reset empties the grid and lays it over the candidates' bounding rectangle.
func (g *nmsGrid) reset(rects []nmsRect, cand []int) {
	for i := range g.cells {
		g.cells[i] = g.cells[i][:0]
	}
	g.seen, g.looks = g.seen[:0], 0
	g.y0, g.x0 = math.Inf(1), math.Inf(1)
	y1, x1 := math.Inf(-1), math.Inf(-1)
	for _, i := range cand {
		r := &rects[i]
		g.y0, g.x0, y1, x1 = min(g.y0, r.y1), min(g.x0, r.x1), max(y1, r.y2), max(x1, r.x2)
	}
	g.cy, g.cx = (y1-g.y0)/nmsGridSide, (x1-g.x0)/nmsGridSide
	if !(g.cy > 0) || math.IsInf(g.cy, 0) {
		g.cy = 1
	}
	if !(g.cx > 0) || math.IsInf(g.cx, 0) {
		g.cx = 1
	}
}

// cell is the grid index of coordinate v from origin o in cells of size d, clamped.
func nmsCell(v, o, d float64) int {
	c := (v - o) / d
	switch {
	case !(c >= 0):
		return 0
	case c >= nmsGridSide-1:
		return nmsGridSide - 1
	}
	return int(c)
}

// span is the range of cells r covers.
func (g *nmsGrid) span(r *nmsRect) (i0, i1, j0, j1 int) {
	return nmsCell(r.y1, g.y0, g.cy), nmsCell(r.y2, g.y0, g.cy), nmsCell(r.x1, g.x0, g.cx), nmsCell(r.x2, g.x0, g.cx)
}

// add records kept box k, r, in the cells it covers.
func (g *nmsGrid) add(r *nmsRect, k int) {
	i0, i1, j0, j1 := g.span(r)
	for i := i0; i <= i1; i++ {
		for j := j0; j <= j1; j++ {
			g.cells[i*nmsGridSide+j] = append(g.cells[i*nmsGridSide+j], int32(k))
		}
	}
	g.seen = append(g.seen, 0)
}

// suppressed reports whether a kept box in r's cells has an IoU with r above th.
func (g *nmsGrid) suppressed(r *nmsRect, kept []nmsRect, th float64) bool {
	g.looks++
	i0, i1, j0, j1 := g.span(r)
	for i := i0; i <= i1; i++ {
		for j := j0; j <= j1; j++ {
			for _, k := range g.cells[i*nmsGridSide+j] {
				if g.seen[k] == g.looks {
					continue
				}
				g.seen[k] = g.looks
				if r.iou(&kept[k]) > th {
					return true
				}
			}
		}
	}
	return false
}
