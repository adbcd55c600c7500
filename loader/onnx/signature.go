package onnx

import (
	"fmt"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// NamedType is a graph input or output as the model declares it. Default is an
// input's value when a caller omits it (its initializer, Module.Defaults); nil for an
// input a caller must give.
type NamedType struct {
	Name    string
	Type    graph.Type
	Default *tensor.Tensor
}

// Interface is a model's declared inputs (graph inputs that are not constants: those
// without an initializer, and from IR version 4 on those with one, which is their
// default) and outputs, read without loading the model.
type Interface struct {
	Inputs, Outputs []NamedType
	// Constants are the graph inputs that are constants: in a model before IR version
	// 4, those with an initializer (every initializer was listed as an input then).
	Constants []string
}

// LoadSignature reads only a model's interface: a module whose main function has the
// model's inputs (Interface.Inputs) as parameters, their defaults, and no nodes.
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
	ir, err := varintField(data, 1)
	if err != nil {
		return fail(fmt.Errorf("%s: %w: not an ONNX model: %v", path, ErrInvalid, err))
	}
	var inputs, outputs []*onnxpb.ValueInfoProto
	inits := map[string][]byte{} // name → the initializer's TensorProto bytes
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
			inits[string(name)] = v
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("%s: %w: %v", path, ErrInvalid, err))
	}
	b := graph.NewBuilder("main")
	it := &Interface{}
	td := &tensorDecoder{dir: filepath.Dir(path), limit: DefaultMaxTensorBytes}
	listed := map[string]bool{}
	for _, in := range inputs {
		listed[in.GetName()] = true
	}
	initNames := make([]string, 0, len(inits))
	for name := range inits {
		initNames = append(initNames, name)
	}
	defaults := overridable(int64(ir), initNames, func(n string) bool { return listed[n] })
	for _, in := range inputs {
		tpb, isInit := inits[in.GetName()]
		if isInit && !defaults {
			it.Constants = append(it.Constants, in.GetName())
			continue
		}
		var def *tensor.Tensor
		if isInit {
			var tp onnxpb.TensorProto
			if err := proto.Unmarshal(tpb, &tp); err != nil {
				return fail(fmt.Errorf("%s: %w: initializer %q: %v", path, ErrInvalid, in.GetName(), err))
			}
			if def, err = td.decode(&tp); err != nil {
				return fail(fmt.Errorf("%s: initializer: %w", path, err))
			}
		}
		var t graph.Type
		switch {
		case in.GetType() != nil:
			if t, err = convertType(b.M, in.GetType(), fmt.Sprintf("input %q", in.GetName())); err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
		case def != nil:
			t = graph.NewConst(in.GetName(), def).Type
			t.Known = nil
		default:
			return fail(fmt.Errorf("%s: %w: input %q has no type", path, ErrInvalid, in.GetName()))
		}
		if def != nil {
			if err := checkDefault(in.GetName(), t, def); err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
			if b.M.Defaults == nil {
				b.M.Defaults = map[string]*tensor.Tensor{}
			}
			b.M.Defaults[in.GetName()] = def
		}
		b.Param(in.GetName(), t)
		it.Inputs = append(it.Inputs, NamedType{Name: in.GetName(), Type: t, Default: def})
	}
	for _, out := range outputs {
		t := graph.Type{Kind: graph.KindTensor, UnknownRank: true}
		if out.GetType() != nil {
			if ct, err := convertType(b.M, out.GetType(), fmt.Sprintf("output %q", out.GetName())); err == nil {
				t = ct
			}
		}
		it.Outputs = append(it.Outputs, NamedType{Name: out.GetName(), Type: t})
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

// varintField returns the last varint field num of a message (0 if absent).
func varintField(msg []byte, num protowire.Number) (int64, error) {
	var out int64
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		msg = msg[k:]
		if n == num && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(msg)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			out, msg = int64(v), msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		msg = msg[m:]
	}
	return out, nil
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
