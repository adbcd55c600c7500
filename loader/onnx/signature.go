package onnx

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// NamedType is a graph input or output as the model declares it.
type NamedType struct {
	Name string
	Type graph.Type
}

// Interface is a model's declared inputs (graph inputs that are not initializers) and
// outputs, read without loading the model.
type Interface struct {
	Inputs, Outputs []NamedType
}

// LoadSignature reads only a model's interface: a module whose main function has the
// model's inputs (graph inputs that are not initializers) as parameters and no nodes.
// It scans the protobuf without decoding tensors, so a warm start that finds the
// compiled model in the journal can read its inputs without loading the model.
func LoadSignature(path string) (*graph.Module, error) {
	m, _, err := loadInterface(path)
	return m, err
}

// ReadInterface is LoadSignature with the declared outputs too (their types may be
// partly unknown: outputs need not declare shapes).
func ReadInterface(path string) (*Interface, error) {
	_, it, err := loadInterface(path)
	return it, err
}

func loadInterface(path string) (*graph.Module, *Interface, error) {
	f, err := mapFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.close()
	return interfaceOf(path, f.data)
}

// interfaceOf reads the interface from a model's bytes (path names it in errors).
func interfaceOf(path string, data []byte) (*graph.Module, *Interface, error) {
	fail := func(err error) (*graph.Module, *Interface, error) { return nil, nil, err }
	if len(data) == 0 || int64(len(data)) > maxModelBytes {
		return fail(fmt.Errorf("%s: %w: %d bytes", path, ErrInvalid, len(data)))
	}
	g, err := field(data, 7)
	if err != nil || g == nil {
		return fail(fmt.Errorf("%s: %w: not an ONNX model (no graph)", path, ErrInvalid))
	}
	var inputs, outputs []*onnxpb.ValueInfoProto
	inits := map[string]bool{}
	err = eachField(g, func(num protowire.Number, v []byte) error {
		switch num {
		case 11:
			var vi onnxpb.ValueInfoProto
			if err := proto.Unmarshal(v, &vi); err != nil {
				return err
			}
			inputs = append(inputs, &vi)
		case 12:
			var vi onnxpb.ValueInfoProto
			if err := proto.Unmarshal(v, &vi); err != nil {
				return err
			}
			outputs = append(outputs, &vi)
		case 5:
			name, err := field(v, 8)
			if err != nil {
				return err
			}
			inits[string(name)] = true
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("%s: %w: %v", path, ErrInvalid, err))
	}
	b := graph.NewBuilder("main")
	it := &Interface{}
	for _, in := range inputs {
		if inits[in.GetName()] {
			continue
		}
		if in.GetType() == nil {
			return fail(fmt.Errorf("%s: %w: input %q has no type", path, ErrInvalid, in.GetName()))
		}
		t, err := convertType(b.M, in.GetType(), fmt.Sprintf("input %q", in.GetName()))
		if err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
		b.Param(in.GetName(), t)
		it.Inputs = append(it.Inputs, NamedType{in.GetName(), t})
	}
	for _, out := range outputs {
		t := graph.Type{Kind: graph.KindTensor, UnknownRank: true}
		if out.GetType() != nil {
			if ct, err := convertType(b.M, out.GetType(), fmt.Sprintf("output %q", out.GetName())); err == nil {
				t = ct
			}
		}
		it.Outputs = append(it.Outputs, NamedType{out.GetName(), t})
	}
	return b.M, it, nil
}

// field returns the last length-delimited field num of a message (nil if absent).
func field(msg []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	err := eachField(msg, func(n protowire.Number, v []byte) error {
		if n == num {
			out = v
		}
		return nil
	})
	return out, err
}

// eachField calls fn on every length-delimited field of a message, skipping the rest.
func eachField(msg []byte, fn func(protowire.Number, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, msg)
			if m < 0 {
				return protowire.ParseError(m)
			}
			msg = msg[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(msg)
		if m < 0 {
			return protowire.ParseError(m)
		}
		msg = msg[m:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
