package codegen_test

import (
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestGoldenGatherIndexCheck covers an index read from data: the check helper, its
// constant hoisted out of the row loop (which stays a plain vector loop) and the
// status the kernel returns with the bad index and extent in its context.
func TestGoldenGatherIndexCheck(t *testing.T) {
	rows, n := te.Dim("rows"), te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, rows, loopir.Int(64))
	ind := te.Placeholder("I", tensor.Int64, n)
	y := te.Compute("Y", []loopir.Expr{n, loopir.Int(64)}, func(i []loopir.Expr) loopir.Expr {
		return x.At(te.CheckedIndex(ind.At(i[0]), rows), i[1])
	})
	f, err := te.Lower("gather", []*te.Tensor{x, ind}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitCWith(codegen.COptions{ExternRuntime: true}, lowerGeneric(t, f))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "gather_index_check.c", src.Code)
}
