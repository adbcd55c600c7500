package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestMatMulPackedTensorized runs the tensorized matmul against the reference with tails
// in every dimension (m, n not multiples of the tile, k not a multiple of KC), with a
// static and a symbolic m, for each declared GEMM micro-kernel the host can run, in both
// forms: k split into blocks (separate init, accumulating calls) and k whole
// (zero-initializing calls).
func TestMatMulPackedTensorized(t *testing.T) {
	const m, n, k = 37, 70, 300
	av, bv := kerneltest.Random(1, m*k), kerneltest.Random(2, k*n)
	want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
		tensor.MustFromSlice(tensor.Shape{m, k}, av), tensor.MustFromSlice(tensor.Shape{k, n}, bv)})
	for _, g := range runnable(intrin.Gemms()) {
		for _, v := range []struct {
			symbolic, packA bool
			cfg             GemmConfig
			call            string
		}{{false, false, GemmConfig{KC: 128, MC: 2, Parallel: true}, g.Update.Name + "("},
			{true, true, GemmConfig{KC: 128, MC: 2, Parallel: true}, g.Update.Name + "("},
			{false, true, GemmConfig{KC: 512, MC: 3, Parallel: true}, g.Init.Name + "("},
			{true, false, GemmConfig{KC: 1024, MC: 4, Parallel: true}, g.Init.Name + "("},
		} {
			symbolic := v.symbolic
			name := v.call[:len(v.call)-1]
			if symbolic {
				name += "/symbolic-m"
			}
			if v.packA {
				name += "/packed-a"
			}
			t.Run(name, func(t *testing.T) {
				var mm loopir.Expr = loopir.Int(m)
				var dims []int64
				if symbolic {
					mm, dims = te.Dim("m"), []int64{m}
				}
				a := te.Placeholder("a", tensor.Float32, mm, loopir.Int(k))
				b := te.Placeholder("b", tensor.Float32, loopir.Int(k), loopir.Int(n))
				nr := g.NR
				mr := int64(0)
				if v.packA {
					mr = g.MR
				}
				c := MatMulPacked(a, b, mr, nr)
				f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{c})
				if err != nil {
					t.Fatal(err)
				}
				s := schedule.New(f)
				if err := ScheduleMatMulPacked(s, g, v.cfg); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(loopir.Print(s.Func()), "call "+v.call) {
					t.Fatalf("no call of %s in\n%s", v.call, loopir.Print(s.Func()))
				}
				got := kerneltest.Run(t, s.Func(), dims, m*n, av, bv)
				kerneltest.Close(t, "tensorized matmul", got, want)
			})
		}
	}
}

// TestMicroKernelNarrowColumns runs each micro-kernel the host can run on products
// narrower than its tile (one partial column tile of 1 to nv vectors, the last vector
// whole or not, or a partial half vector; 13 rows, a partial row tile), in both forms,
// against the reference: the narrow path's tiles of fewer vectors, masked last vector
// (AVX-512, AVX2) or scalar columns (the generic family).
func TestMicroKernelNarrowColumns(t *testing.T) {
	const m, k = 13, 37
	for _, g := range runnable(intrin.Gemms()) {
		lanes := int64(4)
		switch {
		case strings.Contains(g.Update.Name, "_avx512_"):
			lanes = 16
		case strings.Contains(g.Update.Name, "_avx2_"):
			lanes = 8
		}
		var widths []int64
		for nv := int64(1); nv*lanes <= g.NR; nv++ {
			n := nv * lanes
			if nv%2 == 1 {
				n -= 3 // a partial last vector
			}
			if n < g.NR { // not a whole tile
				widths = append(widths, n)
			}
		}
		if g.NR%lanes != 0 {
			widths = append(widths, g.NR-3) // a partial half vector (AVX-512's 14×24)
		}
		for _, n := range widths {
			av, bv := kerneltest.Random(3, m*k), kerneltest.Random(4, k*int(n))
			want := kerneltest.Ref(t, graph.OpMatMul, nil, []*tensor.Tensor{
				tensor.MustFromSlice(tensor.Shape{m, k}, av), tensor.MustFromSlice(tensor.Shape{k, int(n)}, bv)})
			for _, kc := range []int64{16, 64} { // accumulating calls, then one zero-initializing call
				a := te.Placeholder("a", tensor.Float32, loopir.Int(m), loopir.Int(k))
				b := te.Placeholder("b", tensor.Float32, loopir.Int(k), loopir.Int(n))
				f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{MatMulPacked(a, b, 0, g.NR)})
				if err != nil {
					t.Fatal(err)
				}
				s := schedule.New(f)
				if err := ScheduleMatMulPacked(s, g, GemmConfig{KC: kc, MC: 2}); err != nil {
					t.Fatal(err)
				}
				got := kerneltest.Run(t, s.Func(), nil, m*int(n), av, bv)
				kerneltest.Close(t, fmt.Sprintf("%s, %d columns, KC %d", g.Update.Name, n, kc), got, want)
			}
		}
	}
}
