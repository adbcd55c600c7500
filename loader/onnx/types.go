package onnx

import (
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// convertType maps a TypeProto to a graph.Type. dim_param names become module symbols
// (sanitized to identifiers); dims with neither value nor param get fresh symbols; a
// missing shape means unknown rank.
func convertType(m *graph.Module, tp *onnxpb.TypeProto, what string) (graph.Type, error) {
	switch {
	case tp == nil:
		return graph.Type{}, invalidf("%s has no type", what)
	case tp.GetTensorType() != nil:
		tt := tp.GetTensorType()
		dt := tensor.DType(tt.GetElemType())
		if !dt.Valid() {
			return graph.Type{}, unsupportedf("%s: element type %d", what, tt.GetElemType())
		}
		if tt.Shape == nil {
			return graph.Type{Kind: graph.KindTensor, DType: dt, UnknownRank: true}, nil
		}
		dims := make([]graph.Dim, len(tt.GetShape().GetDim()))
		for i, d := range tt.GetShape().GetDim() {
			switch {
			case d.GetDimParam() != "":
				dims[i] = m.AddSymbol(symbolName(d.GetDimParam()))
			case d.Value != nil && d.GetDimValue() >= 0:
				if _, ok := d.Value.(*onnxpb.TensorShapeProto_Dimension_DimValue); ok {
					dims[i] = graph.Const(d.GetDimValue())
					continue
				}
				dims[i] = m.FreshSymbol()
			default:
				dims[i] = m.FreshSymbol()
			}
		}
		return graph.TensorType(dt, dims...), nil
	case tp.GetSequenceType() != nil:
		t := graph.Type{Kind: graph.KindSequence}
		if et := tp.GetSequenceType().GetElemType(); et != nil {
			e, err := convertType(m, et, what+" element")
			if err != nil {
				return graph.Type{}, err
			}
			t.Elem = &e
		}
		return t, nil
	case tp.GetOptionalType() != nil:
		t := graph.Type{Kind: graph.KindOptional}
		if et := tp.GetOptionalType().GetElemType(); et != nil {
			e, err := convertType(m, et, what+" element")
			if err != nil {
				return graph.Type{}, err
			}
			t.Elem = &e
		}
		return t, nil
	case tp.GetMapType() != nil:
		return graph.Type{}, unsupportedf("%s: map types", what)
	case tp.GetSparseTensorType() != nil:
		return graph.Type{}, unsupportedf("%s: sparse tensors", what)
	}
	return graph.Type{}, invalidf("%s has an empty type", what)
}

// symbolName turns an arbitrary dim_param into an identifier ("batch size" → "batch_size").
func symbolName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
