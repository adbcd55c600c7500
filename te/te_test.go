package te

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

func matmul(m, n, k loopir.Expr) (a, b, c *Tensor) {
	a = Placeholder("A", tensor.Float32, m, k)
	b = Placeholder("B", tensor.Float32, k, n)
	r := RAxis("k", k)
	c = Compute("C", []loopir.Expr{m, n}, func(i []loopir.Expr) loopir.Expr {
		return Sum(Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	return a, b, c
}

func TestLowerMatmul(t *testing.T) {
	m, n := Dim("m"), Dim("n")
	a, b, c := matmul(m, n, loopir.Int(64))
	f, err := Lower("matmul", []*Tensor{a, b}, []*Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	want := `primfunc matmul(A: f32[m, 64], B: f32[64, n], C: f32[m, n]) dims(m, n) {
  for C_l0 in [0, m) {
    for C_l1 in [0, n) {
      for C_r0 in [0, 64) {
        block C {
          S C_i0[m] = C_l0
          S C_i1[n] = C_l1
          R k[64] = C_r0
          reads A[0:m, 0:64]
          reads B[0:64, 0:n]
          writes C[C_i0:(C_i0 + 1), C_i1:(C_i1 + 1)]
          init {
            C[C_i0, C_i1] = 0f
          }
          C[C_i0, C_i1] = (C[C_i0, C_i1] + (A[C_i0, k] * B[k, C_i1]))
        }
      }
    }
  }
}
`
	if err := loopir.Verify(f); err != nil {
		t.Fatalf("lowered function does not verify: %v", err)
	}
	if got := loopir.Print(f); got != want {
		t.Errorf("lowered matmul:\n%s\nwant:\n%s", got, want)
	}
}

func TestLowerErrors(t *testing.T) {
	a, _, c := matmul(loopir.Int(2), loopir.Int(2), loopir.Int(2))
	if _, err := Lower("x", []*Tensor{a}, []*Tensor{c}); !errors.Is(err, ErrLower) {
		t.Errorf("missing input B: %v", err)
	}
	if _, err := Lower("x", []*Tensor{a}, []*Tensor{a}); !errors.Is(err, ErrLower) {
		t.Errorf("placeholder as output: %v", err)
	}
}
