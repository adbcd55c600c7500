package roofline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/graph"
)

// ErrNotCounted: a group's work depends on a shape that is not static.
var ErrNotCounted = errors.New("work not counted")

// Work is what one launch of a kernel must do at least.
type Work struct {
	Op    graph.Op // the anchor's op
	Kind  string   // a convolution's: depthwise, pointwise, grouped or regular; "matmul"; "" for other ops
	Shape string   // the anchor's shape, for people (conv: kernel, stride, channels, spatial)
	FLOPs int64    // 2 per multiply-add of the anchor's product; 0 for other ops
	Bytes int64    // each tensor read from outside the group once, each output written once
}

// Intensity is FLOPs per byte.
func (w Work) Intensity() float64 {
	if w.Bytes == 0 {
		return 0
	}
	return float64(w.FLOPs) / float64(w.Bytes)
}

// Bound is the least time in seconds w takes under m's roofline.
func (m Machine) Bound(w Work) float64 {
	return max(float64(w.FLOPs)/m.PeakFLOPs, float64(w.Bytes)/m.Bandwidth)
}

// Fraction is the share of m's roofline that a launch doing w in secs seconds reaches:
// its FLOP/s over min(peak, bandwidth × intensity), or for a kernel of no counted FLOPs
// its bytes/s over the bandwidth.
func (m Machine) Fraction(w Work, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return m.Bound(w) / secs
}

// GroupWork counts the work of a fused group: nodes[0] the anchor, then the nodes run
// inside its kernel in order, the last writing the kernel's outputs. Every tensor it
// touches must have a static shape (else ErrNotCounted).
func GroupWork(nodes []*graph.Node) (Work, error) {
	if len(nodes) == 0 {
		panic("BUG: GroupWork of no nodes")
	}
	a := nodes[0]
	w := Work{Op: a.Op}
	inside := map[*graph.Value]bool{}
	read := map[*graph.Value]bool{}
	for _, n := range nodes {
		for _, v := range n.Inputs {
			if v == nil || inside[v] || read[v] {
				continue
			}
			read[v] = true
			b, err := valueBytes(v)
			if err != nil {
				return Work{}, fmt.Errorf("%v input %q: %w", n, v.Name, err)
			}
			w.Bytes += b
		}
		for _, o := range n.Outputs {
			inside[o] = true
		}
	}
	last := nodes[len(nodes)-1]
	for _, o := range last.Outputs {
		b, err := valueBytes(o)
		if err != nil {
			return Work{}, fmt.Errorf("%v output %q: %w", last, o.Name, err)
		}
		w.Bytes += b
	}
	var err error
	switch a.Op {
	case graph.OpConv:
		err = convWork(a, &w)
	case graph.OpConvTranspose:
		err = convTransposeWork(a, &w)
	case graph.OpMatMul:
		err = matMulWork(a, &w)
	case graph.OpGemm:
		err = gemmWork(a, &w)
	}
	if err != nil {
		return Work{}, fmt.Errorf("%v: %w", a, err)
	}
	return w, nil
}

// shapes returns the static shapes of vs (nil values are refused).
func shapes(vs ...*graph.Value) ([][]int64, error) {
	out := make([][]int64, len(vs))
	for i, v := range vs {
		if v == nil {
			return nil, fmt.Errorf("%w: an operand is missing", ErrNotCounted)
		}
		s, ok := v.Type.ConstShape()
		if !ok || v.Type.Kind != graph.KindTensor {
			return nil, fmt.Errorf("%w: %q has no static shape", ErrNotCounted, v.Name)
		}
		for _, d := range s {
			out[i] = append(out[i], int64(d))
		}
	}
	return out, nil
}

func valueBytes(v *graph.Value) (int64, error) {
	s, err := shapes(v)
	if err != nil {
		return 0, err
	}
	return product(s[0]) * int64(v.Type.DType.Size()), nil
}

func product(s []int64) int64 {
	p := int64(1)
	for _, d := range s {
		p *= d
	}
	return p
}

// convShapes is a convolution's (or transposed one's) input, weight and output shapes,
// of one rank of at least 3.
func convShapes(n *graph.Node) (x, k, y []int64, err error) {
	s, err := shapes(n.Inputs[0], n.Inputs[1], n.Outputs[0])
	if err != nil {
		return nil, nil, nil, err
	}
	x, k, y = s[0], s[1], s[2]
	if len(x) < 3 || len(k) != len(x) || len(y) != len(x) {
		return nil, nil, nil, fmt.Errorf("%w: ranks %d, %d, %d", ErrNotCounted, len(x), len(k), len(y))
	}
	return x, k, y, nil
}

// convWork: a Conv's output elements times the multiply-adds of each (W's elements per
// output channel, C/group × the kernel's window).
func convWork(n *graph.Node, w *Work) error {
	x, k, y, err := convShapes(n)
	if err != nil {
		return err
	}
	group, strides := int64(1), []int64(nil)
	if a, _ := n.Attrs.(*graph.ConvAttrs); a != nil {
		group, strides = a.Group, a.Strides
	}
	w.FLOPs = 2 * product(y) * product(k[1:])
	window := k[2:]
	switch {
	case group > 1 && group == x[1] && k[1] == 1:
		w.Kind = "depthwise"
	case group > 1:
		w.Kind = "grouped"
	case product(window) == 1:
		w.Kind = "pointwise"
	default:
		w.Kind = "regular"
	}
	w.Shape = convShape(window, strides, x, y, group)
	return nil
}

// convTransposeWork: each input element times the multiply-adds it scatters (W's
// elements per input channel, M/group × the window).
func convTransposeWork(n *graph.Node, w *Work) error {
	x, k, y, err := convShapes(n)
	if err != nil {
		return err
	}
	group, strides := int64(1), []int64(nil)
	if a, _ := n.Attrs.(*graph.ConvTransposeAttrs); a != nil {
		group, strides = a.Group, a.Strides
	}
	w.FLOPs = 2 * product(x) * product(k[1:])
	w.Kind = "transposed"
	w.Shape = convShape(k[2:], strides, x, y, group)
	return nil
}

// convShape is "k3x3 s2 32->96 112x112->56x56" (with " g4" for groups).
func convShape(window, strides []int64, x, y []int64, group int64) string {
	dims := func(s []int64) string {
		p := make([]string, len(s))
		for i, d := range s {
			p[i] = fmt.Sprint(d)
		}
		return strings.Join(p, "x")
	}
	stride := "1"
	if len(strides) > 0 {
		stride = dims(strides)
		if slices.Min(strides) == slices.Max(strides) {
			stride = fmt.Sprint(strides[0])
		}
	}
	s := fmt.Sprintf("k%s s%s %d->%d %s->%s", dims(window), stride, x[1], y[1], dims(x[2:]), dims(y[2:]))
	if x[0] != 1 {
		s = fmt.Sprintf("n%d %s", x[0], s)
	}
	if group > 1 {
		s += fmt.Sprintf(" g%d", group)
	}
	return s
}

// matMulWork: the output's elements times K, the length of A's last axis.
func matMulWork(n *graph.Node, w *Work) error {
	s, err := shapes(n.Inputs[0], n.Inputs[1], n.Outputs[0])
	if err != nil {
		return err
	}
	a, b, y := s[0], s[1], s[2]
	if len(a) == 0 || len(b) == 0 {
		return fmt.Errorf("%w: a scalar operand", ErrNotCounted)
	}
	k := a[len(a)-1]
	w.FLOPs = 2 * product(y) * k
	w.Kind = "matmul"
	nn := int64(1)
	if len(b) >= 2 {
		nn = b[len(b)-1]
	}
	m := product(y) / max(nn, 1)
	w.Shape = fmt.Sprintf("%dx%dx%d", m, k, nn)
	return nil
}

// gemmWork: M×N outputs times K (A's second axis, its first when transposed); the
// beta·C term is not counted.
func gemmWork(n *graph.Node, w *Work) error {
	s, err := shapes(n.Inputs[0], n.Outputs[0])
	if err != nil {
		return err
	}
	x, y := s[0], s[1]
	if len(x) != 2 || len(y) != 2 {
		return fmt.Errorf("%w: Gemm of ranks %d, %d", ErrNotCounted, len(x), len(y))
	}
	k := x[1]
	if a, _ := n.Attrs.(*graph.GemmAttrs); a != nil && a.TransA != 0 {
		k = x[0]
	}
	w.FLOPs = 2 * y[0] * y[1] * k
	w.Kind = "matmul"
	w.Shape = fmt.Sprintf("%dx%dx%d", y[0], k, y[1])
	return nil
}
