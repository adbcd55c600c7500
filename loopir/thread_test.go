package loopir

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// boundCopy is y[i*4+j] = x[i*4+j] with i bound to outer and j to inner.
func boundCopy(outer, inner ForKind) *PrimFunc {
	x := &Buffer{Name: "x", DT: tensor.Float32, Shape: []Expr{Int(32)}}
	i, j := NewVar("i"), NewVar("j")
	idx := []Expr{Bin(Add, Bin(Mul, i, Int(4)), j)}
	return &PrimFunc{Name: "copy", Params: []*Buffer{x},
		Body: &For{Var: i, Min: Int(0), Extent: Int(8), Kind: outer,
			Body: &For{Var: j, Min: Int(0), Extent: Int(4), Kind: inner,
				Body: &Store{Buf: x, Index: idx, Value: &Load{Buf: x, Index: idx}}}}}
}

func TestBoundLoopsPrintTheirThreadAxis(t *testing.T) {
	text := Print(boundCopy(Bound(BlockIdxX), Bound(ThreadIdxX)))
	for _, want := range []string{"for i in [0, 8) bind(blockIdx.x) {", "for j in [0, 4) bind(threadIdx.x) {"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	for a := BlockIdxX; a < NumThreadAxes; a++ {
		k := Bound(a)
		if got, ok := k.Thread(); !ok || got != a {
			t.Errorf("Bound(%v).Thread() = %v, %v", a, got, ok)
		}
		if p, ok := ParseThreadAxis(a.String()); !ok || p != a {
			t.Errorf("ParseThreadAxis(%q) = %v, %v", a.String(), p, ok)
		}
	}
	if _, ok := Parallel.Thread(); ok {
		t.Error("a parallel loop reports a thread axis")
	}
}

func TestVerifyRefusesAnAxisBoundTwiceAndHostThreadsBesideALaunch(t *testing.T) {
	if err := Verify(boundCopy(Bound(BlockIdxX), Bound(ThreadIdxX))); err != nil {
		t.Fatalf("a launch nest is refused: %v", err)
	}
	for name, f := range map[string]*PrimFunc{
		"axis bound twice":       boundCopy(Bound(ThreadIdxX), Bound(ThreadIdxX)),
		"parallel beside launch": boundCopy(Parallel, Bound(ThreadIdxX)),
	} {
		if err := Verify(f); !errors.Is(err, ErrVerify) {
			t.Errorf("%s: got %v, want ErrVerify", name, err)
		}
	}
}
