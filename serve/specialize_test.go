package serve

import (
	"context"
	"testing"
	"time"

	"github.com/kilnrt/kiln/internal/kerneltest"
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
