package onnx

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// Data is a decoded test-data file: exactly one of Tensor, Sequence, Optional is set.
type Data struct {
	Name     string
	Tensor   *tensor.Tensor
	Sequence *Seq
	Optional *Opt
}

// Seq is a decoded SequenceProto of tensors.
type Seq struct {
	Elem  tensor.DType
	Items []*tensor.Tensor
}

// Opt is a decoded OptionalProto; Value nil means empty.
type Opt struct{ Value *Data }

// maxDataBytes bounds a single test-data file.
const maxDataBytes = 1 << 30

// ReadTensor decodes a serialized TensorProto file.
func ReadTensor(path string) (*tensor.Tensor, error) {
	d, err := ReadData(path, graph.Type{Kind: graph.KindTensor})
	if err != nil {
		return nil, err
	}
	return d.Tensor, nil
}

// ReadData decodes a TensorProto, SequenceProto or OptionalProto file; hint.Kind says which.
func ReadData(path string, hint graph.Type) (*Data, error) {
	b, err := readBounded(path, maxDataBytes)
	if err != nil {
		return nil, err
	}
	d, err := DecodeData(b, hint)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// DecodeData decodes serialized test data (see ReadData).
func DecodeData(b []byte, hint graph.Type) (*Data, error) {
	td := &tensorDecoder{limit: DefaultMaxTensorBytes}
	switch hint.Kind {
	case graph.KindSequence:
		var sp onnxpb.SequenceProto
		if err := proto.Unmarshal(b, &sp); err != nil {
			return nil, fmt.Errorf("%w: not a SequenceProto: %v", ErrInvalid, err)
		}
		return decodeSeq(td, &sp)
	case graph.KindOptional:
		var op onnxpb.OptionalProto
		if err := proto.Unmarshal(b, &op); err != nil {
			return nil, fmt.Errorf("%w: not an OptionalProto: %v", ErrInvalid, err)
		}
		return decodeOpt(td, &op)
	}
	var tp onnxpb.TensorProto
	if err := proto.Unmarshal(b, &tp); err != nil {
		return nil, fmt.Errorf("%w: not a TensorProto: %v", ErrInvalid, err)
	}
	t, err := td.decode(&tp)
	if err != nil {
		return nil, err
	}
	return &Data{Name: tp.GetName(), Tensor: t}, nil
}

// DefaultMaxTensorBytes is the loader's default tensor size limit.
const DefaultMaxTensorBytes = loader.DefaultMaxTensorBytes

// SequenceProto/OptionalProto elem_type values (onnx-data.proto).
const (
	elemTensor   = int32(onnxpb.SequenceProto_TENSOR)
	elemSequence = int32(onnxpb.OptionalProto_SEQUENCE)
	elemOptional = int32(onnxpb.OptionalProto_OPTIONAL)
)

func decodeSeq(td *tensorDecoder, sp *onnxpb.SequenceProto) (*Data, error) {
	switch sp.GetElemType() {
	case elemTensor, 0:
	default:
		return nil, unsupportedf("sequence %q of element kind %d", sp.GetName(), sp.GetElemType())
	}
	s := &Seq{}
	for i, tp := range sp.GetTensorValues() {
		t, err := td.decode(tp)
		if err != nil {
			return nil, fmt.Errorf("sequence element %d: %w", i, err)
		}
		if i > 0 && t.DType != s.Elem {
			return nil, invalidf("sequence %q mixes %v and %v", sp.GetName(), s.Elem, t.DType)
		}
		s.Elem = t.DType
		s.Items = append(s.Items, t)
	}
	return &Data{Name: sp.GetName(), Sequence: s}, nil
}

func decodeOpt(td *tensorDecoder, op *onnxpb.OptionalProto) (*Data, error) {
	d := &Data{Name: op.GetName(), Optional: &Opt{}}
	switch op.GetElemType() {
	case elemTensor:
		if op.GetTensorValue() != nil {
			t, err := td.decode(op.GetTensorValue())
			if err != nil {
				return nil, err
			}
			d.Optional.Value = &Data{Tensor: t}
		}
	case elemSequence:
		if op.GetSequenceValue() != nil {
			s, err := decodeSeq(td, op.GetSequenceValue())
			if err != nil {
				return nil, err
			}
			d.Optional.Value = s
		}
	case elemOptional, 0:
		// an optional holding an optional, or undefined: treat as empty when nothing set
		if op.GetOptionalValue() != nil {
			return nil, unsupportedf("optional %q of an optional", op.GetName())
		}
	default:
		return nil, unsupportedf("optional %q of element kind %d", op.GetName(), op.GetElemType())
	}
	return d, nil
}
