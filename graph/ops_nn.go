package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Convolution, pooling and matrix products.

// ConvAttrs is shared by Conv, ConvInteger and QLinearConv.
type ConvAttrs struct {
	AutoPad     string  `attr:"auto_pad" default:"NOTSET"`
	Dilations   []int64 `attr:"dilations" min:"1"`
	Group       int64   `attr:"group" default:"1" min:"1"`
	KernelShape []int64 `attr:"kernel_shape" min:"1"`
	Pads        []int64 `attr:"pads" min:"0"`
	Strides     []int64 `attr:"strides" min:"1"`
}

// ConvTransposeAttrs as in ONNX.
type ConvTransposeAttrs struct {
	AutoPad       string  `attr:"auto_pad" default:"NOTSET"`
	Dilations     []int64 `attr:"dilations" min:"1"`
	Group         int64   `attr:"group" default:"1" min:"1"`
	KernelShape   []int64 `attr:"kernel_shape" min:"1"`
	OutputPadding []int64 `attr:"output_padding" min:"0"`
	OutputShape   []int64 `attr:"output_shape" min:"0"`
	Pads          []int64 `attr:"pads" min:"0"`
	Strides       []int64 `attr:"strides" min:"1"`
}

// PoolAttrs is shared by MaxPool, AveragePool and LpPool.
type PoolAttrs struct {
	AutoPad         string  `attr:"auto_pad" default:"NOTSET"`
	CeilMode        int64   `attr:"ceil_mode"`
	CountIncludePad int64   `attr:"count_include_pad"`
	Dilations       []int64 `attr:"dilations" min:"1"`
	KernelShape     []int64 `attr:"kernel_shape" required:"true" min:"1"`
	P               int64   `attr:"p" default:"2"`
	Pads            []int64 `attr:"pads" min:"0"`
	StorageOrder    int64   `attr:"storage_order"`
	Strides         []int64 `attr:"strides" min:"1"`
}

// LpAttrs is for GlobalLpPool.
type LpAttrs struct {
	P int64 `attr:"p" default:"2"`
}

// GemmAttrs as in ONNX.
type GemmAttrs struct {
	Alpha  float32 `attr:"alpha" default:"1"`
	Beta   float32 `attr:"beta" default:"1"`
	TransA int64   `attr:"transA"`
	TransB int64   `attr:"transB"`
}

func nnOps() []OpInfo {
	return []OpInfo{
		{Op: OpConv, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ConvAttrs](), Pattern: OutEWiseFusable, Infer: inferConv(tensor.Undefined)},
		{Op: OpConvInteger, MinIn: 2, MaxIn: 4, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ConvAttrs](), Pattern: OutEWiseFusable, Infer: inferConv(tensor.Int32)},
		{Op: OpConvTranspose, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ConvTransposeAttrs](), Pattern: OutEWiseFusable, Infer: inferConvTranspose},
		{Op: OpMaxPool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 2, Attrs: reflect.TypeFor[PoolAttrs](), Pattern: OutEWiseFusable, Infer: inferPool},
		{Op: OpAveragePool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[PoolAttrs](), Pattern: OutEWiseFusable, Infer: inferPool},
		{Op: OpLpPool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[PoolAttrs](), Pattern: OutEWiseFusable, Infer: inferPool},
		{Op: OpGlobalAveragePool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: CommReduce, Infer: inferGlobalPool},
		{Op: OpGlobalMaxPool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: CommReduce, Infer: inferGlobalPool},
		{Op: OpGlobalLpPool, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[LpAttrs](), Pattern: CommReduce, Infer: inferGlobalPool},
		{Op: OpGemm, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[GemmAttrs](), Pattern: OutEWiseFusable, Infer: inferGemm},
		{Op: OpMatMul, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Pattern: OutEWiseFusable, Infer: inferMatMul(tensor.Undefined)},
		{Op: OpMatMulInteger, MinIn: 2, MaxIn: 4, MinOut: 1, MaxOut: 1, Pattern: OutEWiseFusable, Infer: inferMatMul(tensor.Int32)},
	}
}

// checkGroups checks a grouped convolution's channels where they are static: the
// input has group times the weight's input channels, and the output channels divide
// into the groups.
func checkGroups(n *Node, inC, wC, outC Dim, group int64) error {
	c, ok1 := inC.Value()
	wc, ok2 := wC.Value()
	if ok1 && ok2 && c != wc*group {
		return Inferf(n, "the input has %d channels; the weight takes %d per group, %d groups", c, wc, group)
	}
	if m, ok := outC.Value(); ok && m%group != 0 {
		return Inferf(n, "%d output channels do not divide into %d groups", m, group)
	}
	return nil
}

// AttrOr returns v[i], or def when v is shorter (absent per-axis attributes).
func AttrOr(v []int64, i int, def int64) int64 {
	if i < len(v) {
		return v[i]
	}
	return def
}

// windowKernel is a convolution's kernel extents: the weight's spatial extents, -1
// where symbolic, or kernel_shape's, which must match the weight's where they are known.
func windowKernel(n *Node, kernelShape []int64, w Type) ([]int64, error) {
	sp := len(w.Shape) - 2
	kernel := make([]int64, sp)
	for i := range sp {
		k, ok := w.Shape[2+i].Value()
		if len(kernelShape) > i {
			if ok && k != kernelShape[i] {
				return nil, Inferf(n, "kernel_shape %v does not match the weight %v", kernelShape, w)
			}
			k, ok = kernelShape[i], true
		}
		if !ok {
			k = -1
		}
		kernel[i] = k
	}
	return kernel, nil
}

func inferConv(outDT tensor.DType) InferFunc {
	return func(ic *InferCtx, n *Node) ([]Type, error) {
		x, okx, err := ranked(n, 0)
		if err != nil {
			return nil, err
		}
		w, okw, err := ranked(n, 1)
		if err != nil {
			return nil, err
		}
		dt := x.DType
		if outDT != tensor.Undefined {
			dt = outDT
		}
		if !okx || !okw {
			return unknownRank(dt), nil
		}
		if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
			return nil, Inferf(n, "input %v and weight %v ranks do not fit a convolution", x, w)
		}
		a := n.Attrs.(*ConvAttrs)
		sp := len(x.Shape) - 2
		if err := checkGroups(n, x.Shape[1], w.Shape[1], w.Shape[0], a.Group); err != nil {
			return nil, err
		}
		kernel, err := windowKernel(n, a.KernelShape, w)
		if err != nil {
			return nil, err
		}
		win, err := ConvWindow(a, kernel)
		if err != nil {
			return nil, Inferf(n, "%v", err)
		}
		out := []Dim{x.Shape[0], w.Shape[0]}
		for i := range sp {
			out = append(out, win.OutDim(ic, i, x.Shape[2+i]))
		}
		return []Type{TensorType(dt, out...)}, nil
	}
}

func inferConvTranspose(ic *InferCtx, n *Node) ([]Type, error) {
	x, okx, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	w, okw, err := ranked(n, 1)
	if err != nil {
		return nil, err
	}
	if !okx || !okw {
		return unknownRank(x.DType), nil
	}
	if len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, Inferf(n, "input %v and weight %v ranks do not fit a convolution", x, w)
	}
	a := n.Attrs.(*ConvTransposeAttrs)
	sp := len(x.Shape) - 2
	c, ok1 := x.Shape[1].Value()
	wc, ok2 := w.Shape[0].Value()
	if (ok1 && ok2 && c != wc) || (ok2 && wc%a.Group != 0) {
		return nil, Inferf(n, "input %v and weight %v do not fit %d groups", x, w, a.Group)
	}
	kernel, err := windowKernel(n, a.KernelShape, w)
	if err != nil {
		return nil, err
	}
	win, err := ConvTransposeWindow(a, kernel)
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	out := []Dim{x.Shape[0], w.Shape[1].Scale(max(a.Group, 1))}
	for i := range sp {
		out = append(out, win.OutDim(ic, i, x.Shape[2+i]))
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferPool(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		t := unknownRank(x.DType)
		return append(t, unknownRank(tensor.Int64)...), nil
	}
	a := n.Attrs.(*PoolAttrs)
	sp := len(x.Shape) - 2
	if sp < 1 || len(a.KernelShape) != sp {
		return nil, Inferf(n, "kernel_shape %v for input %v", a.KernelShape, x)
	}
	win, err := PoolWindow(a)
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	out := []Dim{x.Shape[0], x.Shape[1]}
	for i := range sp {
		out = append(out, win.OutDim(ic, i, x.Shape[2+i]))
	}
	return []Type{TensorType(x.DType, out...), TensorType(tensor.Int64, out...)}, nil
}

func inferGlobalPool(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if len(x.Shape) < 2 {
		return nil, Inferf(n, "input rank %d, want >= 2", len(x.Shape))
	}
	out := append([]Dim{}, x.Shape[:2]...)
	for range x.Shape[2:] {
		out = append(out, Const(1))
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferGemm(_ *InferCtx, n *Node) ([]Type, error) {
	a, oka, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	b, okb, err := ranked(n, 1)
	if err != nil {
		return nil, err
	}
	if !oka || !okb || len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, Inferf(n, "Gemm takes matrices, got %v and %v", a, b)
	}
	at := n.Attrs.(*GemmAttrs)
	m, k1 := a.Shape[0], a.Shape[1]
	if at.TransA != 0 {
		m, k1 = k1, m
	}
	k2, nn := b.Shape[0], b.Shape[1]
	if at.TransB != 0 {
		k2, nn = nn, k2
	}
	if k1.IsConst() && k2.IsConst() && !k1.Equal(k2) {
		return nil, Inferf(n, "inner dimensions %v and %v differ", k1, k2)
	}
	return []Type{TensorType(a.DType, m, nn)}, nil
}

func inferMatMul(outDT tensor.DType) InferFunc {
	return func(_ *InferCtx, n *Node) ([]Type, error) {
		a, oka, err := ranked(n, 0)
		if err != nil {
			return nil, err
		}
		b, okb, err := ranked(n, 1)
		if err != nil {
			return nil, err
		}
		dt := a.DType
		if outDT != tensor.Undefined {
			dt = outDT
		}
		if !oka || !okb {
			return unknownRank(dt), nil
		}
		as, bs := a.Shape, b.Shape
		if len(as) == 0 || len(bs) == 0 {
			return nil, Inferf(n, "MatMul of a scalar")
		}
		va, vb := len(as) == 1, len(bs) == 1
		if va {
			as = []Dim{Const(1), as[0]}
		}
		if vb {
			bs = []Dim{bs[0], Const(1)}
		}
		k1, k2 := as[len(as)-1], bs[len(bs)-2]
		if k1.IsConst() && k2.IsConst() && !k1.Equal(k2) {
			return nil, Inferf(n, "inner dimensions %v and %v differ", k1, k2)
		}
		batch, err := BroadcastDims(as[:len(as)-2], bs[:len(bs)-2])
		if err != nil {
			return nil, Inferf(n, "%v", err)
		}
		out := batch
		if !va {
			out = append(out, as[len(as)-2])
		}
		if !vb {
			out = append(out, bs[len(bs)-1])
		}
		return []Type{TensorType(dt, out...)}, nil
	}
}
