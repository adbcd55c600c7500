package gpu_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestZooNodesLowerForOpenCLAndReductionsMatchRef lowers every node of every zoo model
// with the GPU strategies for the OpenCL device: each is a kernel or refused (no
// strategy applies), never an error; the first node of each op that the reduction rule,
// the rows rule or the tiled matmul takes in each model runs on the device at its real
// shape against the reference evaluator (symbols bound to 2).
func TestZooNodesLowerForOpenCLAndReductionsMatchRef(t *testing.T) {
	zoo := testdata.Zoo(t)
	d := openclOrSkip(t)
	tg := openclTarget(t, d)
	st := gpu.Strategies(kernels.Default())
	entries, err := os.ReadDir(zoo)
	if err != nil {
		t.Fatal(err)
	}
	reduced := 0
	for _, e := range entries {
		path := filepath.Join(zoo, e.Name(), "model.onnx")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		m, err := onnx.Load(path, onnx.Options{})
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		env := map[string]int64{}
		for _, s := range m.Symbols {
			env[s] = 2
		}
		ran := map[graph.Op]bool{}
		for _, n := range m.Main.Nodes {
			c, in, ok := nodeCase(n, env)
			if !ok {
				continue
			}
			impl, err := st.Lower(n, in, tg)
			if errors.Is(err, kernels.ErrNoKernel) {
				continue
			}
			if err != nil {
				t.Errorf("%s: %v: %v", e.Name(), n, err)
				continue
			}
			switch impl.Strategy {
			case "gpu-reduce", "gpu-reduce-tree":
				reduced++
			case "gpu-matmul-tiled", "gpu-conv-gemm", "gpu-rows", "gpu-rows-tree":
			default:
				continue
			}
			if !ran[n.Op] && len(n.Outputs) == 1 {
				ran[n.Op] = true
				c.name = fmt.Sprintf("%s %v", e.Name(), n)
				checkCases(t, []gcase{c}, d, tg, openclLoader(d))
				t.Logf("%s: %s matches the reference", c.name, impl.Strategy)
			}
		}
	}
	if reduced == 0 {
		t.Error("no zoo node took the reduction rule")
	}
}

// nodeCase is a zoo node as a test case (its constant inputs constants, the others
// run-time inputs) and its kernel inputs; ok is false for a node with an omitted input
// or an input that is not a ranked tensor.
func nodeCase(n *graph.Node, env map[string]int64) (gcase, []kernels.Input, bool) {
	c := gcase{op: n.Op, attrs: n.Attrs, consts: map[int]*tensor.Tensor{}, binds: []map[string]int64{env}}
	in := make([]kernels.Input, len(n.Inputs))
	syms := kernels.Syms{}
	for i, v := range n.Inputs {
		if v == nil || v.Type.Kind != graph.KindTensor || v.Type.UnknownRank {
			return c, nil, false
		}
		in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...), Const: v.Const}
		c.args = append(c.args, v.Type)
		if v.Const != nil {
			c.consts[i] = v.Const
		}
	}
	return c, in, true
}
