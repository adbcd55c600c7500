package cpu

import (
	"math"
	"testing"

	kt "github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestGenericKeepsTranscendentalTableForReductions checks the generic rule's inlining
// of a stage that calls a transcendental function: a table tab[r] = exp(r/8) read by a
// reduction out[f] = Σ_r x[f, r]·tab[r] that does not index it by f keeps its buffer
// (inlined, every f would compute every exp again), while the same stage read by an
// elementwise consumer at its own index is inlined. Both compute the right values.
func TestGenericKeepsTranscendentalTableForReductions(t *testing.T) {
	const frames, taps = 6, 16
	x := te.Placeholder("x", tensor.Float32, loopir.Int(frames), loopir.Int(taps))
	tab := te.Compute("tab", []loopir.Expr{loopir.Int(taps)}, func(i []loopir.Expr) loopir.Expr {
		return te.Exp(te.Div(te.Cast(tensor.Float32, i[0]), loopir.Float(8, tensor.Float32)))
	})
	r := te.RAxis("r", loopir.Int(taps))
	sum := te.Compute("sum", []loopir.Expr{loopir.Int(frames)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(x.At(i[0], r.Var), tab.At(r.Var)), r)
	})
	scaled := te.Compute("scaled", []loopir.Expr{loopir.Int(taps)}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(tab.At(i[0]), loopir.Float(2, tensor.Float32))
	})
	xs := make([]float32, frames*taps)
	for i := range xs {
		xs[i] = float32(i%7) - 3
	}
	for _, c := range []struct {
		name   string
		out    *te.Tensor
		inline bool
		want   func(k int) float64
	}{
		{"reduction over the table", sum, false, func(f int) float64 {
			s := 0.0
			for r := range taps {
				s += float64(xs[f*taps+r]) * math.Exp(float64(r)/8)
			}
			return s
		}},
		{"elementwise read", scaled, true, func(i int) float64 { return 2 * math.Exp(float64(i)/8) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := te.Lower("k", []*te.Tensor{x}, []*te.Tensor{c.out})
			if err != nil {
				t.Fatal(err)
			}
			s := schedule.New(f)
			if err := ScheduleGeneric(s); err != nil {
				t.Fatal(err)
			}
			_, err = s.GetBlock("tab")
			if kept := err == nil; kept == c.inline {
				t.Fatalf("table kept as a stage: %v, want %v; trace:\n%s", kept, !c.inline, s.Trace())
			}
			n := int(c.out.Shape[0].(*loopir.IntImm).V)
			got := kt.Run(t, s.Func(), nil, n, xs)
			for i := range n {
				if w := c.want(i); math.Abs(float64(got[i])-w) > 1e-4*math.Max(1, math.Abs(w)) {
					t.Fatalf("element %d: %v, want %v", i, got[i], w)
				}
			}
		})
	}
}
