package compiler_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// genModel turns fuzz bytes into a small ONNX model: one float input of a small shape,
// then a chain of one to three nodes, each taking the previous result as its first
// input, with attributes and initializer values drawn from the extremes a hostile or
// careless model file uses (zero and negative strides, huge extents, out-of-range axes
// and indices, NaN and infinities). The same bytes always give the same model.
type genModel struct {
	b     []byte
	p     int
	inits []*onnxpb.TensorProto
	n     int // names
}

// byte returns the next byte (0 when the data is exhausted).
func (g *genModel) byte() byte {
	if g.p >= len(g.b) {
		g.p++
		return 0
	}
	c := g.b[g.p]
	g.p++
	return c
}

func (g *genModel) pick(n int) int { return int(g.byte()) % n }

// extremes of integer attributes and initializer values
var intExtremes = []int64{0, 1, 2, 3, -1, -2, 4, 7, 16, 64, 1 << 31, -(1 << 31), 1<<62 + 1, math.MaxInt64, math.MinInt64, 255}

// small extents of the input
var inputDims = []int64{1, 2, 3, 4, 5, 8, 0, 1, 2, 3}

var floatExtremes = []float32{0, 1, -1, 0.5, 2, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e38, -1e38, 1e-45, -0.0, 3, 100}

func (g *genModel) int() int64 {
	c := g.byte()
	if c >= 128 { // half the time a small value
		return int64(c%8) - 2
	}
	return intExtremes[int(c)%len(intExtremes)]
}

func (g *genModel) ints(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = g.int()
	}
	return out
}

// indices draws n indices for an axis of cur: mostly in [-extent, extent), sometimes
// just outside it or extreme.
func (g *genModel) indices(cur []int64, axis int64, n int) []int64 {
	ext := int64(1)
	if axis >= 0 && axis < int64(len(cur)) {
		ext = max(cur[axis], 1)
	}
	out := make([]int64, n)
	for i := range out {
		switch g.pick(8) {
		case 0:
			out[i] = ext // one past the end
		case 1:
			out[i] = -ext - 1
		case 2:
			out[i] = g.int()
		default:
			out[i] = int64(g.pick(int(2*ext))) - ext
		}
	}
	return out
}

func (g *genModel) name(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%d", prefix, g.n)
}

func str(s string) *string { return &s }

// initInts adds an int64 initializer with the given values (a 1-D tensor) and returns
// its name.
func (g *genModel) initInts(vals []int64) string {
	dt := int32(onnxpb.TensorProto_INT64)
	name := g.name("i")
	g.inits = append(g.inits, &onnxpb.TensorProto{Name: str(name), DataType: &dt, Dims: []int64{int64(len(vals))}, Int64Data: vals})
	return name
}

// initFloats adds a float initializer of a small shape filled from the extremes.
func (g *genModel) initFloats(shape []int64) string {
	dt := int32(onnxpb.TensorProto_FLOAT)
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	n = max(min(n, 4096), 0)
	vals := make([]float32, n)
	for i := range vals {
		if c := g.byte(); c < 200 {
			vals[i] = float32(c%9) - 4
		} else {
			vals[i] = floatExtremes[int(c)%len(floatExtremes)]
		}
	}
	name := g.name("w")
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	g.inits = append(g.inits, &onnxpb.TensorProto{Name: str(name), DataType: &dt, Dims: shape, RawData: raw})
	return name
}

func attrInt(name string, v int64) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_INT
	return &onnxpb.AttributeProto{Name: str(name), Type: &t, I: &v}
}

func attrInts(name string, v []int64) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_INTS
	return &onnxpb.AttributeProto{Name: str(name), Type: &t, Ints: v}
}

func attrFloat(name string, v float32) *onnxpb.AttributeProto {
	t := onnxpb.AttributeProto_FLOAT
	return &onnxpb.AttributeProto{Name: str(name), Type: &t, F: &v}
}

// genOp is one op the generator can place: it returns the node's other inputs and
// attributes given the rank of the value it takes first.
type genOp struct {
	op   string
	make func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto)
}

func unary(op string) genOp {
	return genOp{op, func(*genModel, []int64) ([]string, []*onnxpb.AttributeProto) { return nil, nil }}
}

func binaryOp(op string) genOp {
	return genOp{op, func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		shape := append([]int64{}, cur[g.pick(rank+1):]...)
		for i := range shape {
			if g.pick(3) == 0 {
				shape[i] = 1
			} else if g.pick(8) == 0 {
				shape[i] = inputDims[g.pick(5)]
			}
		}
		return []string{g.initFloats(shape)}, nil
	}}
}

// optional attributes: each present or not, so defaults are exercised too
func (g *genModel) maybe(a *onnxpb.AttributeProto) []*onnxpb.AttributeProto {
	if g.pick(3) == 0 {
		return nil
	}
	return []*onnxpb.AttributeProto{a}
}

func (g *genModel) window(rank int, conv bool) []*onnxpb.AttributeProto {
	sp := max(rank-2, 0)
	var attrs []*onnxpb.AttributeProto
	if !conv || g.pick(2) == 0 {
		attrs = append(attrs, attrInts("kernel_shape", g.ints(sp)))
	}
	attrs = append(attrs, g.maybe(attrInts("strides", g.ints(sp)))...)
	attrs = append(attrs, g.maybe(attrInts("pads", g.ints(2*sp)))...)
	attrs = append(attrs, g.maybe(attrInts("dilations", g.ints(sp)))...)
	return attrs
}

var genOps = []genOp{
	unary("Relu"), unary("Sigmoid"), unary("Exp"), unary("Log"), unary("Sqrt"), unary("Neg"), unary("Tanh"),
	unary("Reciprocal"), unary("Floor"), unary("Erf"), unary("Softsign"), unary("Identity"),
	binaryOp("Add"), binaryOp("Sub"), binaryOp("Mul"), binaryOp("Div"), binaryOp("Pow"), binaryOp("Max"), binaryOp("Min"),
	{"Conv", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		w := make([]int64, max(rank, 3))
		for i := range w {
			w[i] = 1 + int64(g.pick(3))
		}
		group := int64(1)
		if rank >= 2 {
			w[1] = cur[1]
			if c := cur[1]; c > 1 && c%2 == 0 && g.pick(2) == 0 {
				group = 2
				w[1] = c / 2
				w[0] = 2 * w[0]
			}
		}
		if g.pick(6) == 0 {
			w[g.pick(len(w))] = inputDims[g.pick(len(inputDims))]
		}
		attrs := g.window(rank, true)
		if g.pick(6) == 0 {
			group = g.int()
		}
		attrs = append(attrs, attrInt("group", group))
		return []string{g.initFloats(w)}, attrs
	}},
	{"MaxPool", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		return nil, append(g.window(rank, false), g.maybe(attrInt("ceil_mode", g.int()))...)
	}},
	{"AveragePool", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		return nil, append(g.window(rank, false), g.maybe(attrInt("count_include_pad", g.int()))...)
	}},
	{"Gather", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		axis := int64(0)
		if len(cur) > 0 {
			axis = int64(g.pick(len(cur)))
		}
		if g.pick(6) == 0 {
			axis = g.int()
		}
		return []string{g.initInts(g.indices(cur, axis, 1+g.pick(3)))}, []*onnxpb.AttributeProto{attrInt("axis", axis)}
	}},
	{"GatherElements", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(1 + g.pick(3)))}, g.maybe(attrInt("axis", g.int()))
	}},
	{"Reshape", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(g.pick(4)))}, g.maybe(attrInt("allowzero", g.int()))
	}},
	{"Transpose", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		return nil, g.maybe(attrInts("perm", g.ints(rank)))
	}},
	{"Flatten", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return nil, g.maybe(attrInt("axis", g.int()))
	}},
	{"Softmax", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return nil, g.maybe(attrInt("axis", g.int()))
	}},
	{"ReduceSum", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(g.pick(3)))}, g.maybe(attrInt("keepdims", g.int()))
	}},
	{"ReduceMax", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(g.pick(3)))}, g.maybe(attrInt("keepdims", g.int()))
	}},
	{"Concat", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		other := append([]int64{}, cur...)
		axis := int64(0)
		if len(cur) > 0 {
			axis = int64(g.pick(len(cur)))
			other[axis] = inputDims[g.pick(5)]
		}
		if g.pick(6) == 0 {
			axis = g.int()
		}
		return []string{g.initFloats(other)}, []*onnxpb.AttributeProto{attrInt("axis", axis)}
	}},
	{"Slice", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		n := 1 + g.pick(2)
		in := []string{g.initInts(g.ints(n)), g.initInts(g.ints(n))}
		if g.pick(2) == 0 {
			in = append(in, g.initInts(g.ints(n)), g.initInts(g.ints(n)))
		}
		return in, nil
	}},
	{"Pad", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		return []string{g.initInts(g.ints(2 * rank))}, nil
	}},
	{"Expand", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(g.pick(4)))}, nil
	}},
	{"Tile", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		rank := len(cur)
		return []string{g.initInts(g.ints(rank))}, nil
	}},
	{"ConstantOfShape+Add", nil}, // special: a shape initializer, then added to the chain
	{"Squeeze", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(g.pick(2)))}, nil
	}},
	{"Unsqueeze", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(1 + g.pick(2)))}, nil
	}},
	{"MatMul", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		k := inputDims[g.pick(5)]
		if len(cur) > 0 && g.pick(5) != 0 {
			k = cur[len(cur)-1]
		}
		return []string{g.initFloats([]int64{k, inputDims[g.pick(5)]})}, nil
	}},
	{"DepthToSpace", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return nil, []*onnxpb.AttributeProto{attrInt("blocksize", g.int())}
	}},
	{"SpaceToDepth", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return nil, []*onnxpb.AttributeProto{attrInt("blocksize", g.int())}
	}},
	{"LRN", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return nil, []*onnxpb.AttributeProto{attrInt("size", g.int()), attrFloat("alpha", floatExtremes[g.pick(len(floatExtremes))])}
	}},
	{"CumSum", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initInts(g.ints(1))}, g.maybe(attrInt("reverse", g.int()))
	}},
	{"LayerNormalization", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		n := inputDims[g.pick(5)]
		if len(cur) > 0 && g.pick(5) != 0 {
			n = cur[len(cur)-1]
		}
		return []string{g.initFloats([]int64{n})}, g.maybe(attrInt("axis", g.int()))
	}},
	{"Clip", func(g *genModel, cur []int64) ([]string, []*onnxpb.AttributeProto) {
		return []string{g.initFloats(nil), g.initFloats(nil)}, nil
	}},
}

// build returns the model's bytes and its input shape. Each node is checked by loading
// the model so far: a node the loader refuses is drawn again (up to three times, then
// kept, ending the chain), so most models reach the compiler with a known shape.
func (g *genModel) build() ([]byte, []int64) {
	rank := g.pick(5)
	shape := make([]int64, rank)
	for i := range shape {
		shape[i] = inputDims[g.pick(len(inputDims))]
	}
	var nodes []*onnxpb.NodeProto
	prev, cur := "x", shape
	for range 1 + g.pick(3) {
		var cand []*onnxpb.NodeProto
		var out string
		ok := false
		for attempt := 0; attempt < 3 && !ok; attempt++ {
			g.inits = g.inits[:g.keep(nodes)]
			op := genOps[g.pick(len(genOps))]
			out = g.name("v")
			if op.make == nil { // ConstantOfShape of an extreme shape, added to the chain
				c := g.name("c")
				cand = []*onnxpb.NodeProto{
					{OpType: str("ConstantOfShape"), Name: str(c), Input: []string{g.initInts(g.ints(1 + g.pick(3)))}, Output: []string{c}},
					{OpType: str("Add"), Name: str(out), Input: []string{prev, c}, Output: []string{out}}}
			} else {
				others, attrs := op.make(g, cur)
				cand = []*onnxpb.NodeProto{{OpType: str(op.op), Name: str(out), Input: append([]string{prev}, others...), Output: []string{out}, Attribute: attrs}}
			}
			var next []int64
			next, ok = loadedShape(g.model(shape, append(nodes, cand...), out))
			if ok {
				cur = next
			}
		}
		nodes = append(nodes, cand...)
		prev = out
		if !ok {
			break
		}
	}
	return g.model(shape, nodes, prev), shape
}

// keep is how many initializers the accepted nodes use (a rejected candidate's are
// dropped).
func (g *genModel) keep(nodes []*onnxpb.NodeProto) int {
	used := map[string]bool{}
	for _, n := range nodes {
		for _, in := range n.Input {
			used[in] = true
		}
	}
	k := 0
	for k < len(g.inits) && used[g.inits[k].GetName()] {
		k++
	}
	return k
}

// loadedShape loads a model and returns its output's static shape.
func loadedShape(b []byte) ([]int64, bool) {
	m, err := onnx.LoadBytes(b, "", onnx.Options{})
	if err != nil || len(m.Main.Results) != 1 {
		return nil, false
	}
	t := m.Main.Results[0].Type
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		v, ok := d.Value()
		if !ok || v > 64 {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

func (g *genModel) model(shape []int64, nodes []*onnxpb.NodeProto, result string) []byte {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dims := make([]*onnxpb.TensorShapeProto_Dimension, len(shape))
	for i, d := range shape {
		dims[i] = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
	}
	in := &onnxpb.ValueInfoProto{Name: str("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
		ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: dims}}}}}
	v17, ir := int64(17), int64(8)
	out := &onnxpb.ValueInfoProto{Name: str(result), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32}}}}
	m := &onnxpb.ModelProto{IrVersion: &ir, OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: str(""), Version: &v17}},
		Graph: &onnxpb.GraphProto{Name: str("fuzz"), Input: []*onnxpb.ValueInfoProto{in}, Output: []*onnxpb.ValueInfoProto{out}, Node: nodes, Initializer: g.inits}}
	b, err := proto.Marshal(m)
	if err != nil {
		panic("BUG: marshal a generated model: " + err.Error())
	}
	return b
}
