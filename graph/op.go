package graph

import (
	"fmt"
	"reflect"
)

// Pattern is an op's fusion class, ordered as in TVM: a group's pattern is the max of its
// members', and fusion rules compare patterns.
type Pattern uint8

const (
	ElemWise        Pattern = iota // out[i] = f(in[i]) on equal shapes
	Broadcast                      // elementwise with numpy broadcasting
	Injective                      // each output element reads a computable set of inputs (reshape, transpose, gather, pad, ...)
	CommReduce                     // commutative reduction over some axes
	OutEWiseFusable                // complex op whose output can absorb elementwise consumers (conv, matmul)
	Tuple                          // builds a tuple
	Opaque                         // anything else: never fused
)

func (p Pattern) String() string {
	return [...]string{"elemwise", "broadcast", "injective", "commreduce", "outewisefusable", "tuple", "opaque"}[p]
}

// Flags are boolean facts about an op.
type Flags uint32

const (
	// Commutative: the first two inputs may be swapped.
	Commutative Flags = 1 << iota
	// DataDependent: output shape depends on input values, not only input shapes.
	DataDependent
	// Stochastic: results are random; not comparable with a reference.
	Stochastic
	// HasSubgraphs: attributes hold Funcs (If/Loop/Scan/SequenceMap).
	HasSubgraphs
	// HostOnly: strings, sequences or optionals; never lowered to a device kernel.
	HostOnly
	// View: the output holds input 0's elements in the same order, only the shape (or
	// nothing) changes, so it can share input 0's storage (Reshape, Flatten, Squeeze,
	// Unsqueeze, Identity).
	View
	// Selects: every output element is one of the inputs' elements unchanged (or a
	// constant), chosen by position or by comparison, with no arithmetic that rounds
	// (Relu, MaxPool, Concat, Slice, Transpose, Max, ...). A value that reaches a
	// rounding op through such ops reaches it bit for bit.
	Selects
)

// InferFunc computes the output types of n from its input types (and constant inputs).
// It returns one Type per output; it may use ic.Fresh for extents it cannot know.
type InferFunc func(ic *InferCtx, n *Node) ([]Type, error)

// OpInfo is one row of the op table: every fact about an op lives here.
type OpInfo struct {
	Op     Op
	Domain string // "" is ai.onnx
	// MinIn/MaxIn bound the input count (MaxIn < 0: variadic). Likewise for outputs.
	MinIn, MaxIn   int
	MinOut, MaxOut int
	// Attrs is the attribute struct type (not a pointer); nil if the op has none.
	Attrs   reflect.Type
	Pattern Pattern
	Flags   Flags
	Infer   InferFunc
}

// Name is the ONNX op_type.
func (i *OpInfo) Name() string { return opNames[i.Op] }

// String returns the ONNX op_type.
func (o Op) String() string {
	if o < NumOps && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint16(o))
}

// Info returns the op's table row, or nil if the op is known by name only.
func (o Op) Info() *OpInfo {
	if o >= NumOps || opTable[o].Op != o || o == OpInvalid {
		return nil
	}
	return &opTable[o]
}

// Supported reports whether the op has a table row.
func (o Op) Supported() bool { return o.Info() != nil }

// LookupOp maps an ONNX (domain, op_type) to an Op. known is true when kiln knows the
// name at all (supported or not); Op.Supported tells whether it can be used.
func LookupOp(domain, name string) (op Op, known bool) {
	if domain == "ai.onnx" {
		domain = ""
	}
	if domain != "" && domain != KilnDomain && domain != TrainingDomain {
		return OpInvalid, false
	}
	o, ok := opByName[name]
	if !ok || opDomain(o) != domain {
		return OpInvalid, false
	}
	return o, true
}

// KilnDomain is the domain of kiln's own ops (LayoutTransform): the text form and passes
// use them; a model file cannot name them as ONNX ops.
const KilnDomain = "kiln"

// TrainingDomain is ONNX's domain of training operators (the optimizers Adagrad, Adam
// and Momentum, opset 1).
const TrainingDomain = "ai.onnx.preview.training"

func opDomain(o Op) string {
	if info := o.Info(); info != nil {
		return info.Domain
	}
	return ""
}

// NewAttrs returns a pointer to a fresh attribute struct for op with defaults applied, or
// nil if the op has no attributes.
func (o Op) NewAttrs() any {
	info := o.Info()
	if info == nil || info.Attrs == nil {
		return nil
	}
	p := reflect.New(info.Attrs)
	if err := applyDefaults(p.Elem()); err != nil {
		panic("BUG: bad default tag on " + o.String() + ": " + err.Error())
	}
	return p.Interface()
}

var opByName = func() map[string]Op {
	m := make(map[string]Op, NumOps)
	for o := OpInvalid + 1; o < NumOps; o++ {
		m[opNames[o]] = o
	}
	return m
}()

// opTable is the single op table, assembled explicitly from the per-family row lists.
var opTable = buildOpTable(
	elementwiseOps(),
	nnOps(),
	nnxOps(),
	quantOps(),
	reduceOps(),
	rnnOps(),
	layoutOps(),
	fusedOps(),
	shapeExprOps(),
	attentionMaskOps(),
	failOps(),
	randomOps(),
	shapeOps(),
	controlOps(),
	miscOps(),
	extraOps(),
	trainingOps(),
	stringOps(),
	signalOps(),
	imageOps(),
)

// selectingOps are the ops flagged Selects, set on their rows after the families are
// assembled (the flag is a fact about the op, not about its family).
var selectingOps = []Op{OpRelu, OpMaxPool, OpGlobalMaxPool, OpConcat, OpSplit, OpSlice,
	OpTranspose, OpPad, OpClip, OpMax, OpMin, OpDepthToSpace, OpSpaceToDepth, OpTile,
	OpExpand, OpGather, OpGatherElements, OpGatherND, OpNeg, OpAbs, OpReduceMax, OpReduceMin,
	OpWhere, OpLayoutTransform, OpIdentity, OpReshape, OpFlatten, OpSqueeze, OpUnsqueeze}

func buildOpTable(families ...[]OpInfo) [NumOps]OpInfo {
	var t [NumOps]OpInfo
	for _, fam := range families {
		for _, row := range fam {
			if row.Op == OpInvalid || row.Op >= NumOps {
				panic(fmt.Sprintf("BUG: op table row with invalid op %d", row.Op))
			}
			if t[row.Op].Op != OpInvalid {
				panic("BUG: duplicate op table row for " + row.Op.String())
			}
			if row.Infer == nil {
				panic("BUG: op table row without Infer: " + row.Op.String())
			}
			if row.Attrs != nil && row.Attrs.Kind() != reflect.Struct {
				panic("BUG: Attrs must be a struct type: " + row.Op.String())
			}
			t[row.Op] = row
		}
	}
	for _, op := range selectingOps {
		if t[op].Op != op {
			panic("BUG: Selects flag for an op without a table row: " + op.String())
		}
		t[op].Flags |= Selects
	}
	return t
}

// SupportedOps lists the ops with table rows, in enum order.
func SupportedOps() []Op {
	var out []Op
	for o := OpInvalid + 1; o < NumOps; o++ {
		if o.Supported() {
			out = append(out, o)
		}
	}
	return out
}
