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

// nestedModel nests depth Ifs (each in the then-branch of the one before); the innermost
// branch is a chain of leaf Add nodes that read the main graph's input x, depth scopes
// up, at every node.
func nestedModel(t *testing.T, depth, leaf int) []byte {
	t.Helper()
	tensorType := func(name string, et onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
		var ds []*onnxpb.TensorShapeProto_Dimension
		for _, d := range dims {
			ds = append(ds, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(et)), Shape: &onnxpb.TensorShapeProto{Dim: ds}}}}}
	}
	graphAttr := onnxpb.AttributeProto_GRAPH
	nodes := make([]*onnxpb.NodeProto, leaf)
	prev := "x"
	for i := range nodes {
		out := "l" + strconv.Itoa(i)
		nodes[i] = &onnxpb.NodeProto{OpType: proto.String("Add"), Input: []string{prev, "x"}, Output: []string{out}}
		prev = out
	}
	g := &onnxpb.GraphProto{Name: proto.String("leaf"), Node: nodes, Output: []*onnxpb.ValueInfoProto{tensorType(prev, onnxpb.TensorProto_FLOAT, 4)}}
	for d := 0; d < depth; d++ {
		out := "o" + strconv.Itoa(d)
		els := &onnxpb.GraphProto{Name: proto.String("else"), Output: []*onnxpb.ValueInfoProto{tensorType("x", onnxpb.TensorProto_FLOAT, 4)}}
		g = &onnxpb.GraphProto{Name: proto.String("level"), Node: []*onnxpb.NodeProto{{OpType: proto.String("If"), Input: []string{"c"}, Output: []string{out},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("then_branch"), Type: &graphAttr, G: g}, {Name: proto.String("else_branch"), Type: &graphAttr, G: els}}}},
			Output: []*onnxpb.ValueInfoProto{tensorType(out, onnxpb.TensorProto_FLOAT, 4)}}
	}
	g.Input = []*onnxpb.ValueInfoProto{tensorType("x", onnxpb.TensorProto_FLOAT, 4), tensorType("c", onnxpb.TensorProto_BOOL)}
	b, err := proto.Marshal(&onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeeplyNestedModelLoads: 300k nodes that each read a value defined 3000 scopes up
// (about the nesting protobuf's recursion limit allows) load about as fast as when it
// is defined 30 scopes up. A lookup through every enclosing scope, in the importer and
// in graph.Verify, made the load time grow with the depth (ten times here).
func TestDeeplyNestedModelLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("large model: run without -short")
	}
	load := func(depth int) time.Duration {
		b := nestedModel(t, depth, 300_000)
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := onnx.LoadBytes(b, "", onnx.Options{})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("a model nested %d deep did not load in a minute", depth)
		}
		took := time.Since(start)
		t.Logf("%d nested subgraphs around 300k nodes (%d bytes): loaded in %v", depth, len(b), took.Round(time.Millisecond))
		return took
	}
	shallow, deep := load(30), load(3000)
	if deep > 4*shallow+time.Second {
		t.Fatalf("nested 3000 deep the load took %v, against %v 30 deep", deep, shallow)
	}
}
