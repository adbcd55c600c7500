package ref

// GridSample and RoiAlign: interpolated reads at computed coordinates, in float64.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func samplingKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpGridSample: T(samplingGridSample),
		graph.OpRoiAlign:   T(samplingRoiAlign),
	}
}

// gridUnnormalize maps a grid coordinate in [-1, 1] to a pixel coordinate on an axis of
// extent d: -1 and 1 are the centers of the end pixels with align_corners, their outer
// edges without.
func gridUnnormalize(g float64, d int, alignCorners bool) float64 {
	if alignCorners {
		return (g + 1) / 2 * float64(d-1)
	}
	return ((g+1)*float64(d) - 1) / 2
}

// gridReflect folds x into [lo, hi] by reflecting it at the bounds as often as needed.
func gridReflect(x, lo, hi float64) float64 {
	span := hi - lo
	if span <= 0 {
		return lo
	}
	switch {
	case x < lo:
		d := lo - x
		k := math.Floor(d / span)
		r := d - k*span
		if math.Mod(k, 2) == 0 {
			return lo + r
		}
		return hi - r
	case x > hi:
		d := x - hi
		k := math.Floor(d / span)
		r := d - k*span
		if math.Mod(k, 2) == 0 {
			return hi - r
		}
		return lo + r
	}
	return x
}

// gridBounds are the reflection bounds of an axis: its pixel centers with
// align_corners, its outer edges without.
func gridBounds(d int, alignCorners bool) (lo, hi float64) {
	if alignCorners {
		return 0, float64(d - 1)
	}
	return -0.5, float64(d) - 0.5
}

// cubicCoeffs are the Keys cubic convolution weights (a = -0.75) of the four taps at
// floor(x)-1 .. floor(x)+2 for the fraction t = x - floor(x).
func cubicCoeffs(t float64) [4]float64 {
	const a = -0.75
	near := func(s float64) float64 { return ((a+2)*s-(a+3))*s*s + 1 }
	far := func(s float64) float64 { return ((a*s-5*a)*s+8*a)*s - 4*a }
	return [4]float64{far(t + 1), near(t), near(1 - t), far(2 - t)}
}

type gridTap struct {
	i int
	w float64
}

func samplingGridSample(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.GridSampleAttrs](n)
	mode, pad, err := graph.ParseGridSample(a)
	if err != nil {
		return nil, Badf("%v", err)
	}
	x, grid := in[0], in[1]
	sp := len(x.Shape) - 2
	if sp < 1 || len(grid.Shape) != sp+2 || grid.Shape[0] != x.Shape[0] || grid.Shape[sp+1] != sp {
		return nil, Badf("GridSample X %v and grid %v do not fit", x.Shape, grid.Shape)
	}
	align := a.AlignCorners != 0
	dims := x.Shape[2:]
	nb, ch := x.Shape[0], x.Shape[1]
	outSp := grid.Shape[1 : sp+1]
	points := outSp.NumElements()
	pixels := dims.NumElements()
	xv, gv := x.Float64s(), grid.Float64s()
	out := make([]float64, nb*ch*points)
	taps := make([][]gridTap, sp)
	// index maps a gridTap's index on axis k to an in-bounds index, or -1 for a zero read
	index := func(i, k int) int {
		d := dims[k]
		switch pad {
		case graph.GridZeros:
			if i < 0 || i >= d {
				return -1
			}
			return i
		case graph.GridBorder:
			return min(max(i, 0), d-1)
		}
		lo, hi := gridBounds(d, align)
		return int(gridReflect(float64(i), lo, hi))
	}
	for b := range nb {
		for p := range points {
			g := gv[(b*points+p)*sp : (b*points+p+1)*sp]
			for k := range sp {
				d := dims[k]
				c := gridUnnormalize(g[sp-1-k], d, align) // the grid lists x (the last axis) first
				if mode == graph.GridNearest {
					if sp == 3 {
						c = math.Round(c)
					} else {
						c = math.RoundToEven(c)
					}
				}
				// cubic pads each of its 4 taps (index), not the coordinate: ONNX
				// Runtime and PyTorch do so
				if lo, hi := gridBounds(d, align); mode != graph.GridCubic && (c < lo || c > hi) {
					switch pad {
					case graph.GridBorder:
						c = math.Min(math.Max(c, 0), float64(d-1))
					case graph.GridReflection:
						c = gridReflect(c, lo, hi)
					}
				}
				f := math.Floor(c)
				switch mode {
				case graph.GridNearest:
					taps[k] = []gridTap{{int(c), 1}}
				case graph.GridLinear:
					taps[k] = []gridTap{{int(f), 1 - (c - f)}, {int(f) + 1, c - f}}
				default:
					w := cubicCoeffs(c - f)
					taps[k] = []gridTap{{int(f) - 1, w[0]}, {int(f), w[1]}, {int(f) + 1, w[2]}, {int(f) + 2, w[3]}}
				}
				for t := range taps[k] {
					taps[k][t].i = index(taps[k][t].i, k)
				}
			}
			for c := range ch {
				base := (b*ch + c) * pixels
				out[(b*ch+c)*points+p] = tapSum(xv[base:base+pixels], dims, taps)
			}
		}
	}
	shape := append(tensor.Shape{nb, ch}, outSp...)
	return one(tensor.FromFloat64s(x.DType, shape, out)), nil
}

// tapSum is Σ over every combination of one gridTap per axis of the product of the taps'
// weights times the pixel they name (0 where a gridTap reads outside: index -1).
func tapSum(img []float64, dims tensor.Shape, taps [][]gridTap) float64 {
	var rec func(k, off int, w float64) float64
	rec = func(k, off int, w float64) float64 {
		if k == len(dims) {
			return w * img[off]
		}
		s := 0.0
		for _, t := range taps[k] {
			if t.i < 0 {
				continue
			}
			s += rec(k+1, off*dims[k]+t.i, w*t.w)
		}
		return s
	}
	return rec(0, 0, 1)
}

func samplingRoiAlign(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.RoiAlignAttrs](n)
	half, err := graph.RoiHalfPixel(a)
	if err != nil {
		return nil, Badf("%v", err)
	}
	x, rois, bi := in[0], in[1], in[2]
	if len(x.Shape) != 4 || len(rois.Shape) != 2 || rois.Shape[1] != 4 || len(bi.Shape) != 1 || bi.Shape[0] != rois.Shape[0] {
		return nil, Badf("RoiAlign X %v, rois %v and batch_indices %v do not fit", x.Shape, rois.Shape, bi.Shape)
	}
	nb, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oh, ow := int(a.OutputHeight), int(a.OutputWidth)
	nr := rois.Shape[0]
	if nr > 0 && ch > 0 && (h < 1 || w < 1) {
		return nil, Badf("RoiAlign over an empty image %v", x.Shape)
	}
	xv, rv, bv := x.Float64s(), rois.Float64s(), bi.Int64s()
	scale := float64(a.SpatialScale)
	out := make([]float64, nr*ch*oh*ow)
	offset := 0.0
	if half {
		offset = 0.5
	}
	for r := range nr {
		b := bv[r]
		if b < 0 || b >= int64(nb) {
			return nil, Badf("RoiAlign batch index %d outside [0, %d)", b, nb)
		}
		box := rv[r*4 : r*4+4]
		x0, y0 := box[0]*scale-offset, box[1]*scale-offset
		rw, rh := box[2]*scale-offset-x0, box[3]*scale-offset-y0
		if !half {
			rw, rh = math.Max(rw, 1), math.Max(rh, 1)
		}
		bh, bw := rh/float64(oh), rw/float64(ow)
		gh, gw := int(a.SamplingRatio), int(a.SamplingRatio)
		if a.SamplingRatio == 0 {
			gh, gw = int(math.Ceil(rh/float64(oh))), int(math.Ceil(rw/float64(ow)))
		}
		if gh*gw > maxSignalLength {
			return nil, Badf("RoiAlign sampling grid %dx%d", gh, gw)
		}
		count := float64(max(gh*gw, 1))
		for c := range ch {
			img := xv[(int(b)*ch+c)*h*w : (int(b)*ch+c+1)*h*w]
			for py := range oh {
				for px := range ow {
					acc, first := 0.0, true
					for iy := range gh {
						y := y0 + float64(py)*bh + (float64(iy)+0.5)*bh/float64(gh)
						for ix := range gw {
							xx := x0 + float64(px)*bw + (float64(ix)+0.5)*bw/float64(gw)
							v := roiSample(img, h, w, y, xx, a.Mode == "max")
							switch {
							case a.Mode != "max":
								acc += v
							case first || v > acc:
								acc = v
							}
							first = false
						}
					}
					if a.Mode != "max" {
						acc /= count
					}
					out[((r*ch+c)*oh+py)*ow+px] = acc
				}
			}
		}
	}
	return one(tensor.FromFloat64s(x.DType, tensor.Shape{nr, ch, oh, ow}, out)), nil
}

// roiSample is the bilinear read of img (h×w) at (y, x): 0 beyond one pixel outside the
// image, clamped to the image otherwise. With max it is the largest of the four
// weighted corners instead of their sum (RoiAlign's max mode).
func roiSample(img []float64, h, w int, y, x float64, maxMode bool) float64 {
	if y < -1 || y > float64(h) || x < -1 || x > float64(w) {
		return 0
	}
	y, x = math.Max(y, 0), math.Max(x, 0)
	yl, xl := int(y), int(x)
	yh, xh := yl+1, xl+1
	if yl >= h-1 {
		yl, yh, y = h-1, h-1, float64(h-1)
	}
	if xl >= w-1 {
		xl, xh, x = w-1, w-1, float64(w-1)
	}
	ly, lx := y-float64(yl), x-float64(xl)
	hy, hx := 1-ly, 1-lx
	c := [4]float64{hy * hx * img[yl*w+xl], hy * lx * img[yl*w+xh], ly * hx * img[yh*w+xl], ly * lx * img[yh*w+xh]}
	if maxMode {
		return math.Max(math.Max(c[0], c[1]), math.Max(c[2], c[3]))
	}
	return c[0] + c[1] + c[2] + c[3]
}
