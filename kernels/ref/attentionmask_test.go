package ref_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestAttentionMaskIsTheChain: kiln.AttentionMask equals the Cast → Sub(1, ·) → Mul(·, K)
// chain it replaces element for element, for masks of several dtypes whose values are
// not only 0 and 1 (large ones too, where f32 rounds), to f32 and f64, with -10000, the
// float32 minimum (overflowing to ±inf) and a K that is not a power of ten (in f64 the
// chain's K is that float32 value, as Recognize requires).
func TestAttentionMaskIsTheChain(t *testing.T) {
	vals := []float64{0, 1, -1, 2, 7, -300, 16777217, 1e9, 0.5, -2.75}
	for _, dt := range []tensor.DType{tensor.Int64, tensor.Int32, tensor.Uint8, tensor.Bool, tensor.Float32, tensor.Float64} {
		for _, to := range []tensor.DType{tensor.Float32, tensor.Float64} {
			for _, k := range []float32{-10000, -math.MaxFloat32, 0.3} {
				src := fmt.Sprintf(`module opsets(""=17)
func @main(%%m: %[1]v[10]) {
  const %%one: %[2]v[] = [1]
  const %%k: %[2]v[] = [%[5]v]
  %%c = Cast(%%m) {to=%[4]d} : %[2]v[10]
  %%s = Sub(%%one, %%c) : %[2]v[10]
  %%y = Mul(%%s, %%k) : %[2]v[10]
  %%a = AttentionMask(%%m) {value=%[3]v, to=%[4]d} : %[2]v[10]
  return %%y, %%a
}`, dt, to, k, int64(to), float64(k)) // the f64 K is the float32 value itself
				m, err := graph.Parse(src)
				if err != nil {
					t.Fatalf("%v\n%s", err, src)
				}
				out, err := ref.Eval(m, map[string]ref.Value{"m": tensor.FromFloat64s(dt, tensor.Shape{10}, vals)}, ref.Options{})
				if err != nil {
					t.Fatal(err)
				}
				chain, op := out[0].(*tensor.Tensor), out[1].(*tensor.Tensor)
				if op.DType != to || !op.Shape.Equal(chain.Shape) {
					t.Fatalf("AttentionMask gives %v%v, chain %v%v", op.DType, op.Shape, chain.DType, chain.Shape)
				}
				w, g := chain.Float64s(), op.Float64s()
				for i := range w {
					if g[i] != w[i] {
						t.Errorf("%v mask to %v, K=%v: element %d = %v, chain %v", dt, to, k, i, g[i], w[i])
					}
				}
			}
		}
	}
}
