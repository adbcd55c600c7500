package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Definitions over symbolic extents: each node is lowered once with a kernel dim per
// symbol and run at several values of them (0, 1 and odd sizes among them) against the
// reference evaluator, then checked static at the last values.

// envs binds the symbols b and s.
var envs = []map[string]int64{
	{"b": 2, "s": 7}, {"b": 1, "s": 1}, {"b": 0, "s": 3}, {"b": 3, "s": 0}, {"b": 1, "s": 17},
}

// nonEmpty binds b and s to positive values only (a -1 in a Reshape target is
// ambiguous when the element count is 0).
var nonEmpty = []map[string]int64{{"b": 2, "s": 7}, {"b": 1, "s": 1}, {"b": 1, "s": 17}}

func checkSym(t *testing.T, op graph.Op, attrs any, numOut int, args ...nt.SymArg) {
	t.Helper()
	nt.CheckSymbolic(t, Strategies(kernels.Default()), op, attrs, numOut, args, envs...)
}

func checkSymAt(t *testing.T, binds []map[string]int64, op graph.Op, attrs any, numOut int, args ...nt.SymArg) {
	t.Helper()
	nt.CheckSymbolic(t, Strategies(kernels.Default()), op, attrs, numOut, args, binds...)
}

func TestSymbolicReshape(t *testing.T) {
	f := tensor.Float32
	// heads split and merged by a shape known only over the symbols (a kiln.ShapeExpr)
	t.Run("split heads", func(t *testing.T) {
		checkSym(t, graph.OpReshape, nil, 1, nt.Sym(f, "b", "s", "12"), nt.ShapeOf("b", "s", "3", "4"))
	})
	t.Run("merge heads", func(t *testing.T) {
		checkSym(t, graph.OpReshape, nil, 1, nt.Sym(f, "b", "s", "2", "5"), nt.ShapeOf("b", "s", "10"))
	})
	// a constant target with 0 and -1 (the input extents are symbolic)
	t.Run("constant 0 0 -1", func(t *testing.T) {
		checkSymAt(t, nonEmpty, graph.OpReshape, nil, 1, nt.Sym(f, "s", "b", "2", "3"), nt.SymC(vec(0, 0, -1)))
	})
	t.Run("constant -1 6", func(t *testing.T) {
		checkSymAt(t, nonEmpty, graph.OpReshape, nil, 1, nt.Sym(f, "b", "2", "3"), nt.SymC(vec(-1, 6)))
	})
	// symbols that do not group: linearized and split by the run-time extents (with
	// allowzero: a computed target entry that is 0 at run time would otherwise copy the
	// input's extent, as ONNX says)
	zero := graph.OpReshape.NewAttrs().(*graph.ReshapeAttrs)
	zero.AllowZero = 1
	t.Run("rows to columns", func(t *testing.T) {
		checkSym(t, graph.OpReshape, zero, 1, nt.Sym(f, "b", "s"), nt.ShapeOf("s", "b"))
	})
	t.Run("merge all", func(t *testing.T) {
		checkSym(t, graph.OpReshape, zero, 1, nt.Sym(f, "3", "b", "s", "2"), nt.ShapeOf("2*b*s", "3"))
	})
	t.Run("integers", func(t *testing.T) {
		checkSym(t, graph.OpReshape, zero, 1, nt.Sym(tensor.Int64, "b", "s"), nt.ShapeOf("b*s"))
	})
}

func TestSymbolicReshapeFamily(t *testing.T) {
	f := tensor.Float32
	for _, axis := range []int64{0, 1, 2, -1} {
		a := graph.OpFlatten.NewAttrs().(*graph.FlattenAttrs)
		a.Axis = axis
		checkSym(t, graph.OpFlatten, a, 1, nt.Sym(f, "b", "s", "3"))
	}
	checkSym(t, graph.OpSqueeze, nil, 1, nt.Sym(f, "s", "1", "b", "4"), nt.SymC(vec(1)))
	checkSym(t, graph.OpSqueeze, nil, 1, nt.Sym(f, "1", "4", "1", "3"))
	checkSym(t, graph.OpUnsqueeze, nil, 1, nt.Sym(tensor.Int64, "s"), nt.SymC(vec(0)))
	checkSym(t, graph.OpUnsqueeze, nil, 1, nt.Sym(f, "b", "s"), nt.SymC(vec(1, -1)))
}

func TestSymbolicExpandTile(t *testing.T) {
	f := tensor.Float32
	// a constant target against symbolic extents, and a target known over the symbols
	checkSym(t, graph.OpExpand, nil, 1, nt.Sym(f, "b", "1", "s"), nt.SymC(vec(1, 4, 1)))
	checkSym(t, graph.OpExpand, nil, 1, nt.Sym(f, "1", "s"), nt.ShapeOf("b", "3", "s"))
	checkSym(t, graph.OpExpand, nil, 1, nt.Sym(f, "s", "1"), nt.ShapeOf("s", "b"))
	checkSym(t, graph.OpTile, nil, 1, nt.Sym(f, "b", "s", "2"), nt.SymC(vec(2, 1, 3)))
}

// TestSymbolicUnsupported: what a symbolic extent makes impossible is refused with
// ErrNoKernel, naming the op.
func TestSymbolicUnsupported(t *testing.T) {
	x := te.Placeholder("x", tensor.Float32, loopir.Int(1), te.Dim("s"))
	n := &graph.Node{Op: graph.OpSqueeze, Outputs: []*graph.Value{{}}}
	_, err := kernels.Default().Build(n, []kernels.Input{{T: x}})
	if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), "Squeeze") {
		t.Errorf("Squeeze without axes of a symbolic extent: %v", err)
	}
}
