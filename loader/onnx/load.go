package onnx

import (
	"errors"
	"fmt"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// maxModelBytes bounds the protobuf file itself (protobuf's own 2 GiB limit).
const maxModelBytes = 2 << 30

// Load reads an ONNX model file; external data is resolved relative to its directory.
func Load(path string, opts Options) (*graph.Module, error) {
	b, err := readBounded(path, maxModelBytes)
	if err != nil {
		return nil, err
	}
	m, err := LoadBytes(b, filepath.Dir(path), opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	b, err := safefile.ReadFile(path, limit)
	if errors.Is(err, safefile.ErrTooLarge) || errors.Is(err, safefile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return b, err
}

// decodeModel unmarshals and checks the model header.
func decodeModel(b []byte) (*onnxpb.ModelProto, map[string]int64, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		return nil, nil, fmt.Errorf("%w: not an ONNX model: %v", ErrInvalid, err)
	}
	if mp.GetGraph() == nil {
		return nil, nil, invalidf("model has no graph")
	}
	opsets := map[string]int64{}
	for _, o := range mp.GetOpsetImport() {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		opsets[d] = o.GetVersion()
	}
	if len(mp.GetOpsetImport()) == 0 && mp.GetIrVersion() < 3 {
		opsets[""] = 1 // IR versions before 3 had no opset imports
	}
	return &mp, opsets, nil
}

// LoadBytes decodes a model held in memory; dir resolves external data ("" forbids it).
func LoadBytes(b []byte, dir string, opts Options) (m *graph.Module, err error) {
	mp, opsets, err := decodeModel(b)
	if err != nil {
		return nil, err
	}
	// model-local functions are only a problem if a node calls one; such a node's
	// domain is not ai.onnx and is reported as unsupported there.
	return loadDecoded(mp, opsets, &tensorDecoder{dir: dir, limit: opts.Limit()})
}

// loadDecoded imports a decoded model whose tensors td resolves.
func loadDecoded(mp *onnxpb.ModelProto, opsets map[string]int64, td *tensorDecoder) (m *graph.Module, err error) {
	bld := graph.NewBuilder("main")
	bld.M.Opsets = opsets
	bld.M.Producer = mp.GetProducerName() + " " + mp.GetProducerVersion()
	im := &importer{m: bld.M, opsets: opsets, td: td, rules: upgradeRules(), ir: mp.GetIrVersion()}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("BUG: loader panicked: %v", r)
		}
	}()
	if err := im.buildGraph(mp.GetGraph(), bld, newScope(), true, nil); err != nil {
		return nil, err
	}
	if err := graph.Verify(bld.M); err != nil {
		if errors.Is(err, graph.ErrVerify) {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, err
	}
	return bld.M, nil
}
