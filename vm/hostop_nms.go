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
	corners := func(b, i int) (y1, x1, y2, x2 float64) {
		p := bv[(b*ns+i)*4 : (b*ns+i)*4+4]
		if center {
			return p[1] - p[3]/2, p[0] - p[2]/2, p[1] + p[3]/2, p[0] + p[2]/2
		}
		return math.Min(p[0], p[2]), math.Min(p[1], p[3]), math.Max(p[0], p[2]), math.Max(p[1], p[3])
	}
	iou := func(b, i, j int) float64 {
		ay1, ax1, ay2, ax2 := corners(b, i)
		by1, bx1, by2, bx2 := corners(b, j)
		inter := math.Max(0, math.Min(ay2, by2)-math.Max(ay1, by1)) * math.Max(0, math.Min(ax2, bx2)-math.Max(ax1, bx1))
		union := (ay2-ay1)*(ax2-ax1) + (by2-by1)*(bx2-bx1) - inter
		if union <= 0 {
			return 0
		}
		return inter / union
	}
	var sel []int64
	cand := make([]int, 0, ns)
	var kept []int
	for b := 0; b < nb; b++ {
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
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if iou(b, i, k) > iouTh {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
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
