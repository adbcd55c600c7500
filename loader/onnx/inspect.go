package onnx

import (
	"fmt"
	"sort"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// ModelInfo summarizes a model without building its graph.
type ModelInfo struct {
	IRVersion  int64
	Producer   string
	Opsets     map[string]int64
	Inputs     []IOInfo // graph inputs that are not initializers
	Outputs    []IOInfo
	OpCounts   map[string]int // "op_type", or "domain:op_type" outside ai.onnx; subgraphs included
	Nodes      int
	ParamBytes int64 // initializer bytes (main graph and subgraphs)
	ParamCount int64 // initializer elements
	// Unsupported lists each (domain, op type) kiln cannot load, once, with the reason.
	Unsupported []UnsupportedOpError
}

// IOInfo is a graph input or output.
type IOInfo struct {
	Name string
	Type graph.Type
}

// Inspect decodes a model file and summarizes it.
func Inspect(path string, opts Options) (*ModelInfo, error) {
	b, err := readBounded(path, maxModelBytes)
	if err != nil {
		return nil, err
	}
	mp, opsets, err := decodeModel(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	info := &ModelInfo{
		IRVersion: mp.GetIrVersion(),
		Producer:  mp.GetProducerName() + " " + mp.GetProducerVersion(),
		Opsets:    opsets,
		OpCounts:  map[string]int{},
	}
	scratch := &graph.Module{}
	g := mp.GetGraph()
	inits := map[string]bool{}
	for _, tp := range g.GetInitializer() {
		inits[tp.GetName()] = true
	}
	for _, in := range g.GetInput() {
		if inits[in.GetName()] {
			continue
		}
		t, err := convertType(scratch, in.GetType(), "input "+in.GetName())
		if err != nil {
			return nil, err
		}
		info.Inputs = append(info.Inputs, IOInfo{in.GetName(), t})
	}
	for _, out := range g.GetOutput() {
		t, err := convertType(scratch, out.GetType(), "output "+out.GetName())
		if err != nil {
			t = graph.Type{Kind: graph.KindTensor, UnknownRank: true}
		}
		info.Outputs = append(info.Outputs, IOInfo{out.GetName(), t})
	}
	seen := map[string]bool{}
	inspectGraph(g, opsets, info, seen)
	sort.Slice(info.Unsupported, func(i, j int) bool { return info.Unsupported[i].Op < info.Unsupported[j].Op })
	return info, nil
}

func inspectGraph(g *onnxpb.GraphProto, opsets map[string]int64, info *ModelInfo, seen map[string]bool) {
	for _, tp := range g.GetInitializer() {
		n := int64(1)
		for _, d := range tp.GetDims() {
			n *= d
		}
		info.ParamCount += n
		info.ParamBytes += n * int64(tensor.DType(tp.GetDataType()).Size())
	}
	for _, np := range g.GetNode() {
		info.Nodes++
		dom := np.GetDomain()
		if dom == "ai.onnx" {
			dom = ""
		}
		key := np.GetOpType()
		if dom != "" {
			key = dom + ":" + key
		}
		info.OpCounts[key]++
		if reason := unsupportedReason(dom, np.GetOpType(), opsets); reason != "" && !seen[key] {
			seen[key] = true
			info.Unsupported = append(info.Unsupported, UnsupportedOpError{
				Domain: dom, Op: np.GetOpType(), Node: np.GetName(), Opset: opsets[dom], Reason: reason,
			})
		}
		for _, a := range np.GetAttribute() {
			if a.GetG() != nil {
				inspectGraph(a.GetG(), opsets, info, seen)
			}
			for _, sg := range a.GetGraphs() {
				inspectGraph(sg, opsets, info, seen)
			}
		}
	}
}

// unsupportedReason says why an op cannot be loaded, or "" if it can (as far as the op's
// identity goes; attributes are checked when the graph is built).
func unsupportedReason(dom, op string, opsets map[string]int64) string {
	if _, ok := opsets[dom]; !ok {
		return fmt.Sprintf("domain %q is not in the model's opset imports", dom)
	}
	if dom == graph.TrainingDomain && opsets[dom] != 1 {
		return fmt.Sprintf("domain %q at opset %d (kiln knows opset 1)", dom, opsets[dom])
	}
	if dom != "" && dom != graph.TrainingDomain {
		return fmt.Sprintf("domain %q is not supported", dom)
	}
	if op == "Constant" {
		return ""
	}
	o, known := graph.LookupOp(dom, op)
	switch {
	case !known:
		return unknownOpReason(dom, op)
	case !o.Supported():
		return "not implemented in kiln yet"
	}
	return ""
}

// unknownOpReason says why kiln has no op of that name: the reason for the ONNX ops it
// leaves out on purpose, else "unknown operator".
func unknownOpReason(dom, op string) string {
	if dom == graph.TrainingDomain && op == "Gradient" {
		return "Gradient (automatic differentiation of a training graph) is not implemented: kiln runs inference, and of the training domain only the optimizers Adagrad, Adam and Momentum"
	}
	return "unknown operator"
}
