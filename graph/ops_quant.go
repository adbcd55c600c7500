package graph

import (
	"reflect"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// Loss ops, quantization ops and Einsum.

// LossAttrs is shared by NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss;
// IgnoreIndex is AbsentInt when not given.
type LossAttrs struct {
	IgnoreIndex int64  `attr:"ignore_index" default:"-9223372036854775808"`
	Reduction   string `attr:"reduction" default:"mean"`
}

// QuantAttrs is shared by QuantizeLinear and DequantizeLinear.
type QuantAttrs struct {
	Axis int64 `attr:"axis" default:"1"`
}

// EinsumAttrs as in ONNX.
type EinsumAttrs struct {
	Equation string `attr:"equation" required:"true"`
}

func quantOps() []OpInfo {
	loss := reflect.TypeFor[LossAttrs]()
	quant := reflect.TypeFor[QuantAttrs]()
	return []OpInfo{
		{Op: OpNegativeLogLikelihoodLoss, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: loss, Pattern: Opaque, Infer: inferLoss},
		{Op: OpSoftmaxCrossEntropyLoss, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 2, Attrs: loss, Pattern: Opaque, Infer: inferLoss},
		{Op: OpQuantizeLinear, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: quant, Pattern: ElemWise, Infer: inferQuantize},
		{Op: OpDequantizeLinear, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: quant, Pattern: ElemWise, Infer: inferDequantize},
		{Op: OpDynamicQuantizeLinear, MinIn: 1, MaxIn: 1, MinOut: 3, MaxOut: 3, Pattern: Opaque, Infer: inferDynamicQuantize},
		{Op: OpQLinearMatMul, MinIn: 8, MaxIn: 8, MinOut: 1, MaxOut: 1, Pattern: OutEWiseFusable, Infer: inferQLinearMatMul},
		{Op: OpQLinearConv, MinIn: 8, MaxIn: 9, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ConvAttrs](), Pattern: OutEWiseFusable, Infer: inferQLinearConv},
		{Op: OpEinsum, MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[EinsumAttrs](), Pattern: Opaque, Infer: inferEinsum},
	}
}

func inferLoss(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	out := []Type{TensorType(x.DType), x}
	out[1].Known = nil
	if n.Attrs.(*LossAttrs).Reduction == "none" {
		if !ok || len(x.Shape) < 2 {
			out[0] = unknownRank(x.DType)[0]
		} else {
			out[0] = TensorType(x.DType, append([]Dim{x.Shape[0]}, x.Shape[2:]...)...)
		}
	}
	return out, nil
}

func inferQuantize(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if err := quantAxis(n, x); err != nil {
		return nil, err
	}
	x.Known, x.DType = nil, tensor.Uint8
	if zp, ok := InType(n, 2); ok {
		x.DType = zp.DType
	}
	return []Type{x}, nil
}

func inferDequantize(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if err := quantAxis(n, x); err != nil {
		return nil, err
	}
	x.Known, x.DType = nil, tensor.Float32
	return []Type{x}, nil
}

// quantAxis checks a (de)quantizer's 1-D scale of more than one value against its
// data x: the axis within x's rank, and as many values as x has along it where known.
func quantAxis(n *Node, x Type) error {
	s, ok := InType(n, 1)
	a, _ := n.Attrs.(*QuantAttrs)
	if !ok || a == nil || s.Kind != KindTensor || s.UnknownRank || len(s.Shape) != 1 || x.UnknownRank {
		return nil
	}
	k, known := s.Shape[0].Value()
	if !known || k == 1 {
		return nil
	}
	r := int64(len(x.Shape))
	ax := a.Axis
	if ax < 0 {
		ax += r
	}
	if ax < 0 || ax >= r {
		return Inferf(n, "axis %d out of range for data of rank %d", a.Axis, r)
	}
	if e, ok := x.Shape[ax].Value(); ok && e != k {
		return Inferf(n, "%d scales for axis %d of extent %d", k, a.Axis, e)
	}
	return nil
}

func inferDynamicQuantize(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	x.Known, x.DType = nil, tensor.Uint8
	return []Type{x, TensorType(tensor.Float32), TensorType(tensor.Uint8)}, nil
}

func inferQLinearMatMul(ic *InferCtx, n *Node) ([]Type, error) {
	zp, err := TensorIn(n, 7)
	if err != nil {
		return nil, err
	}
	if err := qlinearZeroPoints(n); err != nil { // per-row and per-column parameters may be N-D
		return nil, err
	}
	m := &Node{Op: OpMatMul, Name: n.Name, Inputs: []*Value{n.Inputs[0], n.Inputs[3]}}
	ts, err := inferMatMul(zp.DType)(ic, m)
	if err != nil {
		return nil, err
	}
	return ts, nil
}

func inferQLinearConv(ic *InferCtx, n *Node) ([]Type, error) {
	zp, err := TensorIn(n, 7)
	if err != nil {
		return nil, err
	}
	if err := qlinearConvParams(n); err != nil {
		return nil, err
	}
	c := &Node{Op: OpConv, Name: n.Name, Inputs: []*Value{n.Inputs[0], n.Inputs[3]}, Attrs: n.Attrs}
	return inferConv(zp.DType)(ic, c)
}

// qlinearZeroPoints checks that QLinearConv's and QLinearMatMul's zero points of x and w
// (inputs 2 and 5) are of their data's element type, as ONNX types them (y's, input 7,
// sets the result's).
func qlinearZeroPoints(n *Node) error {
	for _, p := range [][2]int{{0, 2}, {3, 5}} {
		d, ok1 := InType(n, p[0])
		z, ok2 := InType(n, p[1])
		if ok1 && ok2 && d.Kind == KindTensor && z.Kind == KindTensor && d.DType != z.DType {
			return Inferf(n, "zero point (input %d) of type %v for data of type %v", p[1], z.DType, d.DType)
		}
	}
	return nil
}

// qlinearConvParams checks QLinearConv's quantization parameters: zero points of their
// data's type; x's and y's scale and zero point (inputs 1, 2, 6, 7) of one element; w's
// (4, 5) of one element or 1-D, one per filter where the weights' first extent is known.
// Kernels index them by output channel, so a model that gives 5 scales for 8 filters is
// refused here, naming the node.
func qlinearConvParams(n *Node) error {
	if err := qlinearZeroPoints(n); err != nil {
		return err
	}
	channels := int64(0)
	if w, ok := InType(n, 3); ok && w.Kind == KindTensor && !w.UnknownRank && len(w.Shape) > 0 {
		if v, known := w.Shape[0].Value(); known {
			channels = v
		}
	}
	for _, i := range []int{1, 2, 4, 5, 6, 7} {
		t, ok := InType(n, i)
		if !ok || t.Kind != KindTensor || t.UnknownRank {
			continue
		}
		shape, known := t.ConstShape()
		k := int64(shape.NumElements())
		switch perChannel := i == 4 || i == 5; {
		case perChannel && len(t.Shape) > 1:
			return Inferf(n, "input %d is %v: want a scalar or 1-D", i, t)
		case !perChannel && (len(t.Shape) > 1 || known && k != 1):
			return Inferf(n, "input %d is %v: want a scalar or one element", i, t)
		case perChannel && known && k != 1 && channels > 0 && k != channels:
			return Inferf(n, "input %d holds %d values for %d output channels", i, k, channels)
		}
	}
	return nil
}

// EinsumTerms splits an equation into input terms and the output term (explicit, or the
// implicit one: labels used once, in alphabetical order, after any ellipsis).
func EinsumTerms(eq string, nIn int) ([]string, string, error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != nIn {
		return nil, "", Inferf(&Node{Op: OpEinsum}, "equation %q has %d terms for %d inputs", eq, len(terms), nIn)
	}
	if explicit {
		return terms, rhs, nil
	}
	count := map[rune]int{}
	ellipsis := false
	for _, t := range terms {
		if strings.Contains(t, "...") {
			ellipsis = true
		}
		for _, r := range strings.ReplaceAll(t, "...", "") {
			count[r]++
		}
	}
	var out []rune
	for r := 'A'; r <= 'z'; r++ {
		if count[r] == 1 {
			out = append(out, r)
		}
	}
	prefix := ""
	if ellipsis {
		prefix = "..."
	}
	return terms, prefix + string(out), nil
}

func inferEinsum(ic *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	terms, out, err := EinsumTerms(n.Attrs.(*EinsumAttrs).Equation, len(n.Inputs))
	if err != nil {
		return nil, err
	}
	dims := map[rune]Dim{}
	var ell []Dim
	for i, t := range terms {
		ti, ok, err := ranked(n, i)
		if err != nil {
			return nil, err
		}
		if !ok {
			return unknownRank(x.DType), nil
		}
		labels := strings.ReplaceAll(t, "...", "")
		nEll := len(ti.Shape) - len(labels)
		if nEll < 0 || (nEll > 0 && !strings.Contains(t, "...")) {
			return nil, Inferf(n, "term %q does not fit input %d of rank %d", t, i, len(ti.Shape))
		}
		k := 0
		for j := 0; j < len(t); j++ {
			if strings.HasPrefix(t[j:], "...") {
				// the ellipses broadcast against each other, aligned on the right
				for len(ell) < nEll {
					ell = append([]Dim{Const(1)}, ell...)
				}
				for e := 0; e < nEll; e++ {
					ell[len(ell)-nEll+e] = einsumExtent(ell[len(ell)-nEll+e], ti.Shape[k+e])
				}
				k += nEll
				j += 2
				continue
			}
			d, seen := dims[rune(t[j])]
			if !seen {
				d = Const(1)
			}
			dims[rune(t[j])] = einsumExtent(d, ti.Shape[k])
			k++
		}
	}
	var shape []Dim
	for j := 0; j < len(out); j++ {
		if strings.HasPrefix(out[j:], "...") {
			shape = append(shape, ell...)
			j += 2
			continue
		}
		d, ok := dims[rune(out[j])]
		if !ok {
			return nil, Inferf(n, "output label %q not in any input", out[j])
		}
		shape = append(shape, d)
	}
	return []Type{TensorType(x.DType, shape...)}, nil
}

// einsumExtent is the extent of a label (or an ellipsis axis) seen with extents a and
// b: an extent 1 broadcasts against the other.
func einsumExtent(a, b Dim) Dim {
	if v, ok := a.Value(); ok && v == 1 {
		return b
	}
	return a
}
