package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// scaleSym lowers Y[i, j] = 2·X[i, j] over a symbolic n × 5.
func scaleSym(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, n, loopir.Int(5))
	y := te.Compute("Y", []loopir.Expr{n, loopir.Int(5)}, func(i []loopir.Expr) loopir.Expr {
		return te.Mul(x.At(i[0], i[1]), loopir.Float(2, tensor.Float32))
	})
	f, err := te.Lower("scale", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBindIsPrintedTracedAndReplayed(t *testing.T) {
	s := New(scaleSym(t))
	_, loops := mustLoops(t, s, "Y")
	fused, err := s.Fuse(loops...)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := s.Split(fused, []int64{-1, 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(s.Func())
	for _, want := range []string{"bind(blockIdx.x)", "bind(threadIdx.x)", "where ("} {
		if !strings.Contains(text, want) {
			t.Errorf("the function lacks %q:\n%s", want, text)
		}
	}
	if err := loopir.Verify(s.Func()); err != nil {
		t.Fatal(err)
	}
	trace := s.Trace().String()
	if !strings.Contains(trace, `bind(l5, "threadIdx.x")`) {
		t.Errorf("the trace lacks the binding:\n%s", trace)
	}
	parsed, err := ParseTrace(trace)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parsed.Replay(scaleSym(t))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, trace)
	}
	if got := loopir.Print(r.Func()); got != text {
		t.Errorf("the replayed trace gives\n%s\nwant\n%s", got, text)
	}
}

func TestBindRefusesWhatALaunchCannotRun(t *testing.T) {
	cases := []struct {
		name string
		f    func(*testing.T) *loopir.PrimFunc
		run  func(*Schedule, []LoopRV) error
	}{
		{"reduction loop", matmulBiasRelu, func(s *Schedule, ls []LoopRV) error {
			return s.Bind(ls[2], loopir.ThreadIdxX)
		}},
		{"axis bound twice", scaleSym, func(s *Schedule, ls []LoopRV) error {
			if err := s.Bind(ls[1], loopir.ThreadIdxX); err != nil {
				return nil
			}
			return s.Bind(ls[0], loopir.ThreadIdxX)
		}},
		{"parallel loop beside", scaleSym, func(s *Schedule, ls []LoopRV) error {
			if err := s.Parallel(ls[0]); err != nil {
				return nil
			}
			return s.Bind(ls[1], loopir.ThreadIdxX)
		}},
		{"symbolic thread extent", scaleSym, func(s *Schedule, ls []LoopRV) error {
			return s.Bind(ls[0], loopir.ThreadIdxX)
		}},
		{"split after binding", scaleSym, func(s *Schedule, ls []LoopRV) error {
			if err := s.Bind(ls[0], loopir.BlockIdxX); err != nil {
				return nil
			}
			_, err := s.Split(ls[0], []int64{-1, 4})
			return err
		}},
		{"fuse after binding", scaleSym, func(s *Schedule, ls []LoopRV) error {
			if err := s.Bind(ls[1], loopir.ThreadIdxX); err != nil {
				return nil
			}
			_, err := s.Fuse(ls...)
			return err
		}},
		{"already vectorized", scaleSym, func(s *Schedule, ls []LoopRV) error {
			if err := s.Vectorize(ls[1]); err != nil {
				return nil
			}
			return s.Bind(ls[1], loopir.ThreadIdxX)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.f(t))
			block := "Y"
			if !s.HasBlock(block) {
				block = "C"
			}
			_, ls := mustLoops(t, s, block)
			before := loopir.Print(s.Func())
			err := c.run(s, ls)
			if !errors.Is(err, ErrSchedule) {
				t.Fatalf("err = %v, want ErrSchedule", err)
			}
			if c.name == "reduction loop" && loopir.Print(s.Func()) != before {
				t.Error("a refused bind changed the function")
			}
		})
	}
}
