package onnx_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
)

// chainModel is an ONNX model whose graph is a chain of n Add nodes, each adding the
// input x to the previous node's output.
func chainModel(t *testing.T, n int) []byte {
	t.Helper()
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 4}}}}}}}}
	}
	nodes := make([]*onnxpb.NodeProto, n)
	prev := "x"
	for i := range nodes {
		out := "v" + strconv.Itoa(i)
		nodes[i] = &onnxpb.NodeProto{OpType: proto.String("Add"), Name: proto.String("add" + strconv.Itoa(i)), Input: []string{prev, "x"}, Output: []string{out}}
		prev = out
	}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph:       &onnxpb.GraphProto{Name: proto.String("chain"), Input: []*onnxpb.ValueInfoProto{vi("x")}, Output: []*onnxpb.ValueInfoProto{vi(prev)}, Node: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChainOf300kNodesLoadsAndOptimizes: loading a 300k-node chain and running the O3
// graph pipeline on it is linear work, about seconds; a walk quadratic in nodes
// anywhere on the way takes minutes, and the test fails after a minute.
func TestChainOf300kNodesLoadsAndOptimizes(t *testing.T) {
	if testing.Short() {
		t.Skip("large model: run without -short")
	}
	const n = 300_000
	b := chainModel(t, n)
	done := make(chan error, 1)
	var load, opt time.Duration
	var m *graph.Module
	go func() {
		start := time.Now()
		var err error
		if m, err = onnx.LoadBytes(b, "", onnx.Options{}); err != nil {
			done <- err
			return
		}
		load = time.Since(start)
		start = time.Now()
		err = passes.Level(3).Run(&passes.Context{Eval: ref.EvalNode}, m)
		opt = time.Since(start)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("loading and optimizing a 300k-node chain did not finish in a minute")
	}
	t.Logf("%d-node chain (%d bytes): load %v, O3 pipeline %v", n, len(b), load.Round(time.Millisecond), opt.Round(time.Millisecond))
	if got, want := len(m.Main.Nodes), (n+255)/256; got != want {
		t.Fatalf("%d nodes after O3, want %d fused groups", got, want)
	}
}
