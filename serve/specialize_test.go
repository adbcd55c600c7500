package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

func openSpecializing(t *testing.T, repo, journal string, after int) *Service {
	t.Helper()
	return openServiceWith(t, repo, journal, Options{SpecializeAfter: after})
}

// TestGenericThenSpecialized: with SpecializeAfter 3 the MLP (free batch dim) compiles
// once, generically, and answers every batch size from that executable; the third
// request of one batch size starts a specialized build in the background, which later
// requests of that size use; no request waits for it, and answers stay right
// (compared with the same rows run alone).
func TestGenericThenSpecialized(t *testing.T) {
	repo, x, want := testRepo(t)
	journal := t.TempDir()
	s := openSpecializing(t, repo, journal, 3)
	infer := func(rows int) {
		t.Helper()
		cols, k := x.Shape[1], min(rows, x.Shape[0])
		in := tensor.MustFromSlice(tensor.Shape{rows, cols}, kerneltest.Random(uint64(rows), rows*cols))
		copy(in.Data.([]float32), x.Data.([]float32)[:k*cols]) // the example's rows first
		resp, err := s.Infer(context.Background(), request(in))
		if err != nil {
			t.Fatal(err)
		}
		out := resp.Outputs[0].Data
		if out.Shape[0] != rows {
			t.Fatalf("batch %d: output %v", rows, out.Shape)
		}
		n := k * want.Shape[1]
		got := tensor.MustFromSlice(tensor.Shape{k, want.Shape[1]}, out.Data.([]float32)[:n])
		if !near(got, tensor.MustFromSlice(tensor.Shape{k, want.Shape[1]}, want.Data.([]float32)[:n])) {
			t.Fatalf("batch %d: first rows %v, want %v", rows, got, want)
		}
	}
	for _, rows := range []int{1, 2, 5, 1, 7} {
		infer(rows)
	}
	if st := s.CompileStats(); st.Compiles != 1 {
		m, _ := s.lookup("mlp", "")
		t.Fatalf("after five requests of four batch sizes: %+v, want the one generic compile (no generic: %s)", st, m.places[0].noGen)
	}
	infer(1) // the third request of batch 1: its specialization starts in the background
	m, _ := s.lookup("mlp", "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.places[0].variants)
		m.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no specialized executable after 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := s.CompileStats(); st.Compiles != 2 {
		t.Fatalf("after the specialization: %+v, want 2 compiles", st)
	}
	for _, rows := range []int{1, 2, 9} { // batch 1 from its own executable, the rest generic
		infer(rows)
	}
	if st := s.CompileStats(); st.Compiles != 2 {
		t.Fatalf("later requests compiled: %+v", st)
	}
	// a restart on the same journal loads the generic executable: no compile
	s.Close()
	s = openSpecializing(t, repo, journal, 3)
	infer(4)
	if st := s.CompileStats(); st.Compiles != 0 || st.JournalHits != 1 {
		t.Fatalf("restart: %+v, want the generic executable from the journal", st)
	}
}

// bcastRepo is a repository of one model, "bcast": y = x + z over x[n] and z[m], free
// dims that meet in a broadcast.
func bcastRepo(t *testing.T) string {
	t.Helper()
	s := func(v string) *string { return &v }
	v17, f32 := int64(17), int32(onnxpb.TensorProto_FLOAT)
	input := func(name, dim string) *onnxpb.ValueInfoProto {
		shape := &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: dim}}}}
		return &onnxpb.ValueInfoProto{Name: s(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: shape}}}}
	}
	g := &onnxpb.GraphProto{Name: s("g"), Node: []*onnxpb.NodeProto{{Name: s("add0"), OpType: s("Add"), Input: []string{"x", "z"}, Output: []string{"y"}}},
		Input:  []*onnxpb.ValueInfoProto{input("x", "n"), input("z", "m")},
		Output: []*onnxpb.ValueInfoProto{{Name: s("y"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32}}}}}}
	b, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: s(""), Version: &v17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "bcast", "1"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, "bcast", "1", "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestBroadcastOfFreeDimsIsAnsweredOrRefused: x[n] + z[m] with generic executables
// (SpecializeAfter 3) and without (0). Equal extents are answered; z of one element is
// answered by broadcasting (the generic executable refuses it, vm.ErrGenericShape, and
// the request gets an executable for its shapes); extents 3 and 2 are an invalid
// request, after which the model still serves.
func TestBroadcastOfFreeDimsIsAnsweredOrRefused(t *testing.T) {
	for _, after := range []int{3, 0} {
		t.Run(fmt.Sprint("after", after), func(t *testing.T) {
			s := openSpecializing(t, bcastRepo(t), t.TempDir(), after)
			infer := func(x, z []float32) (*InferResponse, error) {
				in := func(name string, v []float32) Tensor {
					return Tensor{Name: name, Datatype: "FP32", Shape: []int64{int64(len(v))}, Data: tensor.MustFromSlice(tensor.Shape{len(v)}, v)}
				}
				return s.Infer(context.Background(), &InferRequest{Model: "bcast", ID: "b", Inputs: []Tensor{in("x", x), in("z", z)}})
			}
			for _, c := range []struct{ x, z, want []float32 }{
				{[]float32{1, 2, 3}, []float32{10, 20, 30}, []float32{11, 22, 33}},
				{[]float32{1, 2, 3}, []float32{10}, []float32{11, 12, 13}},
			} {
				resp, err := infer(c.x, c.z)
				if err != nil {
					t.Fatalf("%v + %v: %v", c.x, c.z, err)
				}
				if got := resp.Outputs[0].Data.Data.([]float32); !slices.Equal(got, c.want) {
					t.Fatalf("%v + %v = %v, want %v", c.x, c.z, got, c.want)
				}
			}
			if _, err := infer([]float32{1, 2, 3}, []float32{10, 20}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("extents 3 and 2: got %v, want ErrInvalid", err)
			}
			if ready, err := s.ModelReady("bcast", ""); !ready || err != nil {
				t.Fatalf("after an invalid request the model is not ready: %v", err)
			}
			if resp, err := infer([]float32{4, 5}, []float32{1, 1}); err != nil || !slices.Equal(resp.Outputs[0].Data.Data.([]float32), []float32{5, 6}) {
				t.Fatalf("after an invalid request: %v, %v", resp, err)
			}
		})
	}
}
