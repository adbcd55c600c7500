package compiler

import (
	"context"
	"reflect"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TestTextOpsRunAsHostOpsAndAgreeWithReference compiles a model of the text ops —
// StringNormalizer, a Cast from strings read by a kernel (Add), TfIdfVectorizer on
// integers and a Cast to strings — and compares every output exactly with the reference
// evaluator, strings included.
func TestTextOpsRunAsHostOpsAndAgreeWithReference(t *testing.T) {
	b := graph.NewBuilder("main")
	words := b.Param("words", graph.TensorType(tensor.String, graph.Const(5)))
	nums := b.Param("nums", graph.TensorType(tensor.String, graph.Const(3)))
	ids := b.Param("ids", graph.TensorType(tensor.Int64, graph.Const(2), graph.Const(6)))
	norm, err := b.Op1(graph.OpStringNormalizer, &graph.StringNormalizerAttrs{CaseChangeAction: "UPPER", Stopwords: []string{"the"}}, words)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Op1(graph.OpCast, &graph.CastAttrs{To: int64(tensor.Float32), Saturate: 1}, nums)
	if err != nil {
		t.Fatal(err)
	}
	one := b.Const("one", tensor.Scalar(float32(1)))
	sum, err := b.Op1(graph.OpAdd, nil, f, one)
	if err != nil {
		t.Fatal(err)
	}
	back, err := b.Op1(graph.OpCast, &graph.CastAttrs{To: int64(tensor.String), Saturate: 1}, sum)
	if err != nil {
		t.Fatal(err)
	}
	tfidf, err := b.Op1(graph.OpTfIdfVectorizer, &graph.TfIdfVectorizerAttrs{MaxGramLength: 2, MinGramLength: 1, MaxSkipCount: 1, Mode: "TFIDF",
		NgramCounts: []int64{0, 3}, NgramIndexes: []int64{0, 1, 2, 3, 4}, PoolInt64s: []int64{2, 3, 5, 2, 3, 5, 7},
		Weights: []float32{1, 0.5, 2, 3, 4}}, ids)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(norm, sum, back, tfidf)
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*tensor.Tensor{
		"words": tensor.MustFromSlice(tensor.Shape{5}, []string{"The", "quick", "THE", "fox", "Ünïcode"}),
		"nums":  tensor.MustFromSlice(tensor.Shape{3}, []string{"1.5", "-INF", "1e3"}),
		"ids":   tensor.MustFromSlice(tensor.Shape{2, 6}, []int64{2, 3, 5, 2, 3, 9, 5, 7, 5, 2, 4, 3}),
	}
	dev := openCPU(t)
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(m, target.Host(), Options{Dims: dims, CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Exe.HostCalls); n != 4 {
		t.Fatalf("%d host calls, want 4 (StringNormalizer, two Casts, TfIdfVectorizer)", n)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	var args []*tensor.Tensor
	refIn := map[string]ref.Value{}
	for _, p := range m.Main.Params {
		args = append(args, inputs[p.Name])
		refIn[p.Name] = inputs[p.Name]
	}
	want, err := ref.Eval(m, refIn, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := machine.Run(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		w := want[i].(*tensor.Tensor)
		if !got[i].Shape.Equal(w.Shape) || !reflect.DeepEqual(got[i].Data, w.Data) {
			t.Errorf("output %d: got %v %v, want %v %v", i, got[i].Shape, got[i].Data, w.Shape, w.Data)
		}
	}
}
