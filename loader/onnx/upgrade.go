package onnx

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// upgradeRules rewrite older-opset forms of an op into the IR form (opset 17, with Reduce*
// axes always as input 1). A rule edits the nodeConv in place and returns done=true when
// it has emitted the node(s) itself.
func upgradeRules() map[graph.Op]func(c *nodeConv) (bool, error) {
	rules := map[graph.Op]func(c *nodeConv) (bool, error){
		graph.OpSoftmax:         upSoftmax,
		graph.OpLogSoftmax:      upSoftmax,
		graph.OpHardmax:         upSoftmax,
		graph.OpClip:            upClip,
		graph.OpSplit:           upAttrToInput("split", 13, 1),
		graph.OpSqueeze:         upAttrToInput("axes", 13, 1),
		graph.OpUnsqueeze:       upAttrToInput("axes", 13, 1),
		graph.OpReduceSum:       upAttrToInput("axes", 13, 1),
		graph.OpReduceMean:      upAttrToInput("axes", 18, 1),
		graph.OpReduceMax:       upAttrToInput("axes", 18, 1),
		graph.OpReduceMin:       upAttrToInput("axes", 18, 1),
		graph.OpReduceProd:      upAttrToInput("axes", 18, 1),
		graph.OpReduceL1:        upAttrToInput("axes", 18, 1),
		graph.OpReduceL2:        upAttrToInput("axes", 18, 1),
		graph.OpReduceLogSum:    upAttrToInput("axes", 18, 1),
		graph.OpReduceLogSumExp: upAttrToInput("axes", 18, 1),
		graph.OpReduceSumSquare: upAttrToInput("axes", 18, 1),
		graph.OpPad:             upPad,
		graph.OpSlice:           upSlice,
		graph.OpTopK:            upAttrToInput("k", 10, 1),
		graph.OpReshape:         upAttrToInput("shape", 5, 1),
		graph.OpDropout:         upDropout,
		graph.OpResize:          upResize,
		graph.OpUpsample:        upUpsample,
		graph.OpBatchNormalization: func(c *nodeConv) (bool, error) {
			c.dropLegacy("spatial", 1)
			c.dropLegacy("is_test", -1)
			return false, nil
		},
		graph.OpCast: upCast,
		graph.OpConcat: func(c *nodeConv) (bool, error) {
			if _, ok := c.attrs["axis"]; !ok && c.opset < 4 {
				c.setIntAttr("axis", 1)
			}
			return false, nil
		},
		graph.OpGemm:     func(c *nodeConv) (bool, error) { c.dropLegacy("broadcast", -1); return false, nil },
		graph.OpLSTM:     upRNN,
		graph.OpGRU:      upRNN,
		graph.OpRNN:      upRNN,
		graph.OpScan:     upScan,
		graph.OpDFT:      upDFT,
		graph.OpRoiAlign: upRoiAlign,
		graph.OpScatter: func(c *nodeConv) (bool, error) {
			c.op = graph.OpScatterElements
			return false, nil
		},
		graph.OpGroupNormalization: upGroupNorm,
	}
	for _, op := range legacyBroadcastOps {
		rules[op] = upLegacyBroadcast
	}
	return rules
}

// legacyBroadcastOps had broadcast/axis attributes before opset 7.
var legacyBroadcastOps = []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpPow,
	graph.OpAnd, graph.OpOr, graph.OpXor, graph.OpEqual, graph.OpGreater, graph.OpLess, graph.OpPRelu}

// upLegacyBroadcast accepts opset<7 broadcast=1 only where numpy broadcasting agrees
// (no axis, or axis aligning B with A's trailing dims).
func upLegacyBroadcast(c *nodeConv) (bool, error) {
	axis, hasAxis := c.takeAttr("axis")
	c.dropLegacy("broadcast", -1)
	if c.op == graph.OpPRelu && c.opset < 7 && len(c.inputs) == 2 {
		// PRelu-6 applied a 1-D slope per channel (axis 1); make that explicit
		x, s := c.inputs[0], c.inputs[1]
		if r := x.Type.Rank(); r > 2 && s.Const != nil && len(s.Const.Shape) == 1 && s.Const.Len() > 1 {
			shape := tensor.Shape{s.Const.Len()}
			for i := 2; i < r; i++ {
				shape = append(shape, 1)
			}
			t, err := s.Const.Reshape(shape)
			if err != nil {
				return false, c.errorf("%w: %v", ErrInvalid, err)
			}
			c.inputs[1] = c.constInput(t)
		}
	}
	if hasAxis && len(c.inputs) == 2 && c.inputs[0] != nil && c.inputs[1] != nil {
		ra, rb := c.inputs[0].Type.Rank(), c.inputs[1].Type.Rank()
		ax := axis.GetI()
		if ax < 0 {
			ax += int64(ra)
		}
		if ra < 0 || rb < 0 || ax+int64(rb) != int64(ra) {
			return false, c.unsupported("legacy broadcast with axis=%d", axis.GetI())
		}
	}
	return false, nil
}

// dropLegacy removes an attribute that has no effect in the IR form when it has the given
// value (want < 0: any value).
func (c *nodeConv) dropLegacy(name string, want int64) {
	if a, ok := c.attrs[name]; ok && (want < 0 || a.GetI() == want) {
		delete(c.attrs, name)
	}
}

func (c *nodeConv) setIntAttr(name string, v int64) {
	t := onnxpb.AttributeProto_INT
	c.attrs[name] = &onnxpb.AttributeProto{Name: &name, Type: &t, I: &v}
}

func (c *nodeConv) setStringAttr(name, v string) {
	t := onnxpb.AttributeProto_STRING
	c.attrs[name] = &onnxpb.AttributeProto{Name: &name, Type: &t, S: []byte(v)}
}

// emitWith adds a helper node with the given int attributes and one named output.
func (c *nodeConv) emitWith(op graph.Op, ints map[string]int64, inputs []*graph.Value, out string) (*graph.Value, error) {
	saved := c.attrs
	c.attrs = map[string]*onnxpb.AttributeProto{}
	for k, v := range ints {
		c.setIntAttr(k, v)
	}
	err := c.emit(op, inputs, []string{out})
	c.attrs = saved
	if err != nil {
		return nil, err
	}
	v, _ := c.sc.lookup(out)
	return v, nil
}

// upAttrToInput moves an INTS attribute to a constant int64 input when opset < since.
func upAttrToInput(name string, since int64, pos int) func(c *nodeConv) (bool, error) {
	return func(c *nodeConv) (bool, error) {
		if c.opset >= since {
			return false, nil
		}
		a, ok := c.takeAttr(name)
		if !ok {
			return false, nil
		}
		var vals []int64
		if a.GetType() == onnxpb.AttributeProto_INT {
			vals = []int64{a.GetI()}
		} else {
			vals = a.GetInts()
		}
		shape := tensor.Shape{len(vals)}
		if name == "k" {
			shape = tensor.Shape{1}
		}
		c.setInput(pos, c.constInput(tensor.MustFromSlice(shape, append([]int64{}, vals...))))
		return false, nil
	}
}

// upSoftmax rewrites the opset<13 coerce-to-2D semantics: the op normalizes over all dims
// from axis on. With axis = last dim it equals the opset-13 form; otherwise it becomes
// Flatten(axis) → op(axis=1) → Reshape(Shape(x)).
func upSoftmax(c *nodeConv) (bool, error) {
	if c.opset >= 13 {
		return false, nil
	}
	axis := int64(1)
	if a, ok := c.takeAttr("axis"); ok {
		axis = a.GetI()
	}
	x := c.inputs[0]
	rank := x.Type.Rank()
	if rank < 0 {
		return false, c.unsupported("coerce-to-2D semantics on an input of unknown rank")
	}
	if axis < 0 {
		axis += int64(rank)
	}
	if axis == int64(rank-1) {
		c.setIntAttr("axis", axis)
		return false, nil
	}
	base := c.np.GetName() + "_" + c.np.GetOutput()[0]
	flat, err := c.emitWith(graph.OpFlatten, map[string]int64{"axis": axis}, []*graph.Value{x}, base+"_2d")
	if err != nil {
		return false, err
	}
	inner, err := c.emitWith(c.op, map[string]int64{"axis": 1}, []*graph.Value{flat}, base+"_2d_out")
	if err != nil {
		return false, err
	}
	shp, err := c.emitWith(graph.OpShape, nil, []*graph.Value{x}, base+"_shape")
	if err != nil {
		return false, err
	}
	c.attrs = nil
	return true, c.emit(graph.OpReshape, []*graph.Value{inner, shp}, c.outNames)
}

// upClip moves opset<11 min/max attributes to inputs of the input's dtype.
func upClip(c *nodeConv) (bool, error) {
	if c.opset >= 11 {
		return false, nil
	}
	dt := c.inputs[0].Type.DType
	for i, name := range []string{"min", "max"} {
		if a, ok := c.takeAttr(name); ok {
			c.setInput(1+i, c.constInput(tensor.FromFloat64s(dt, tensor.Shape{}, []float64{float64(a.GetF())})))
		}
	}
	return false, nil
}

// upPad moves opset<11 pads/paddings and value attributes to inputs.
func upPad(c *nodeConv) (bool, error) {
	if c.opset >= 11 {
		return false, nil
	}
	pads, ok := c.takeInts("pads")
	if !ok {
		pads, ok = c.takeInts("paddings")
	}
	if !ok {
		return false, c.errorf("%w: Pad without pads", ErrInvalid)
	}
	c.setInput(1, c.constInput(tensor.MustFromSlice(tensor.Shape{len(pads)}, append([]int64{}, pads...))))
	if a, ok := c.takeAttr("value"); ok {
		dt := c.inputs[0].Type.DType
		c.setInput(2, c.constInput(tensor.FromFloat64s(dt, tensor.Shape{}, []float64{float64(a.GetF())})))
	}
	return false, nil
}

// upSlice moves opset<10 starts/ends/axes attributes to inputs.
func upSlice(c *nodeConv) (bool, error) {
	if c.opset >= 10 {
		return false, nil
	}
	for i, name := range []string{"starts", "ends", "axes"} {
		if v, ok := c.takeInts(name); ok {
			c.setInput(1+i, c.constInput(tensor.MustFromSlice(tensor.Shape{len(v)}, append([]int64{}, v...))))
		}
	}
	return false, nil
}

// upDropout moves the opset<12 ratio attribute to an input and drops is_test.
func upDropout(c *nodeConv) (bool, error) {
	if c.opset >= 12 {
		return false, nil
	}
	c.dropLegacy("is_test", -1)
	if a, ok := c.takeAttr("ratio"); ok {
		c.setInput(1, c.constInput(tensor.Scalar(a.GetF())))
	}
	return false, nil
}

// upResize maps Resize-10 (X, scales) to the opset-13 form (X, roi, scales, sizes), and
// turns empty constant roi/scales/sizes (Resize-11 placeholders) into omitted inputs.
func upResize(c *nodeConv) (bool, error) {
	if c.opset < 11 {
		if len(c.inputs) != 2 {
			return false, c.errorf("%w: Resize-10 takes 2 inputs", ErrInvalid)
		}
		c.inputs = []*graph.Value{c.inputs[0], nil, c.inputs[1]}
		c.setStringAttr("coordinate_transformation_mode", "asymmetric")
		c.setStringAttr("nearest_mode", "floor")
	}
	for i := 1; i < len(c.inputs); i++ {
		if v := c.inputs[i]; v != nil && v.Const != nil && v.Const.Len() == 0 {
			c.inputs[i] = nil
		}
	}
	for len(c.inputs) > 1 && c.inputs[len(c.inputs)-1] == nil {
		c.inputs = c.inputs[:len(c.inputs)-1]
	}
	return false, nil
}

// upUpsample rewrites Upsample (scales attribute before opset 9, input after) as Resize.
func upUpsample(c *nodeConv) (bool, error) {
	c.op = graph.OpResize
	mode := "nearest"
	if a, ok := c.takeAttr("mode"); ok {
		mode = string(a.GetS())
	}
	if mode == "bilinear" {
		mode = "linear"
	}
	if s, ok := c.attrs["scales"]; ok {
		delete(c.attrs, "scales")
		c.setInput(1, c.constInput(tensor.MustFromSlice(tensor.Shape{len(s.GetFloats())}, append([]float32{}, s.GetFloats()...))))
	}
	if len(c.inputs) != 2 {
		return false, c.errorf("%w: Upsample needs scales", ErrInvalid)
	}
	c.inputs = []*graph.Value{c.inputs[0], nil, c.inputs[1]}
	c.setStringAttr("mode", mode)
	c.setStringAttr("coordinate_transformation_mode", "asymmetric")
	if mode == "nearest" {
		c.setStringAttr("nearest_mode", "floor")
	}
	return false, nil
}

// upCast accepts the opset<6 string form of `to`.
func upCast(c *nodeConv) (bool, error) {
	a, ok := c.attrs["to"]
	if ok && a.GetType() == onnxpb.AttributeProto_STRING {
		dt, err := tensor.ParseDType(string(a.GetS()))
		if err != nil {
			return false, c.errorf("%w: %v", ErrInvalid, err)
		}
		c.setIntAttr("to", int64(dt))
	}
	return false, nil
}

// upRNN drops the pre-opset-7 output_sequence hint (outputs are optional since then).
func upRNN(c *nodeConv) (bool, error) {
	c.dropLegacy("output_sequence", -1)
	return false, nil
}

// upDFT moves DFT-17's axis attribute (default 1) to input 2, DFT-20's form.
func upDFT(c *nodeConv) (bool, error) {
	if c.opset >= 20 {
		return false, nil
	}
	axis := int64(1)
	if a, ok := c.takeAttr("axis"); ok {
		axis = a.GetI()
	}
	c.setInput(2, c.constInput(tensor.Scalar(axis)))
	return false, nil
}

// upRoiAlign gives RoiAlign-10, which has no coordinate_transformation_mode, its
// output_half_pixel geometry (RoiAlign-16's default is half_pixel).
func upRoiAlign(c *nodeConv) (bool, error) {
	if _, ok := c.attrs["coordinate_transformation_mode"]; !ok && c.opset < 16 {
		c.setStringAttr("coordinate_transformation_mode", "output_half_pixel")
	}
	return false, nil
}

// upGroupNorm gives GroupNormalization-18 GroupNormalization-21's form: its scale and
// bias, one value per group, are spread over their groups' channels by a Gather of
// constant indices (folded away where they are constants), and its first stage stays in
// X's type (GroupNormalization-21 adds stash_type, float32 when absent). The channel
// count must be known at load time.
func upGroupNorm(c *nodeConv) (bool, error) {
	a, ok := c.attrs["num_groups"]
	if c.opset >= 21 || !ok || len(c.inputs) != 3 || c.inputs[0] == nil || c.inputs[1] == nil || c.inputs[2] == nil {
		return false, nil // the IR form, or a node that emit reports as malformed
	}
	x := c.inputs[0].Type
	if _, ok := c.attrs["stash_type"]; !ok && x.DType.IsFloat() {
		c.setIntAttr("stash_type", int64(x.DType))
	}
	ch, ok := int64(0), false
	if !x.UnknownRank && len(x.Shape) >= 2 {
		ch, ok = x.Shape[1].Value()
	}
	if !ok {
		return false, c.unsupported("a scale per group (opset %d) over a channel count not known at load time (%v)", c.opset, x)
	}
	g := a.GetI()
	if g < 1 || ch%g != 0 {
		return false, c.errorf("%w: %d channels are not divisible by num_groups=%d", ErrInvalid, ch, g)
	}
	idx := make([]int64, ch)
	for i := range idx {
		idx[i] = int64(i) / (ch / g)
	}
	perChannel := c.constInput(tensor.MustFromSlice(tensor.Shape{int(ch)}, idx))
	for i, what := range [...]string{"scale", "bias"} {
		p := c.inputs[1+i]
		if p.Type.UnknownRank || len(p.Type.Shape) != 1 {
			return false, c.errorf("%w: %s %v: want one value per group", ErrInvalid, what, p.Type)
		}
		if v, ok := p.Type.Shape[0].Value(); ok && v != g {
			return false, c.errorf("%w: %s has %d values for num_groups=%d", ErrInvalid, what, v, g)
		}
		spread, err := c.emitWith(graph.OpGather, map[string]int64{"axis": 0}, []*graph.Value{p, perChannel}, c.fresh(what+"_per_channel"))
		if err != nil {
			return false, err
		}
		c.inputs[1+i] = spread
	}
	return false, nil
}
