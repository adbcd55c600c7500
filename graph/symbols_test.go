package graph

import (
	"fmt"
	"testing"
	"time"
)

// TestAddSymbolIsConstantTime: a model may name a symbol for every dim of every input;
// 300k distinct names (each added twice) are recorded once each in well under a
// second, where a scan of the names recorded so far took minutes.
func TestAddSymbolIsConstantTime(t *testing.T) {
	if testing.Short() {
		t.Skip("many symbols: run without -short")
	}
	m := &Module{}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300_000; i++ {
			name := fmt.Sprintf("s%d", i)
			m.AddSymbol(name)
			m.AddSymbol(name)
			if i%1000 == 0 {
				m.FreshSymbol()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("300k symbols were not added in a minute")
	}
	t.Logf("300k symbols in %v", time.Since(start).Round(time.Millisecond))
	if len(m.Symbols) != 300_000+300 {
		t.Fatalf("%d symbols, want %d", len(m.Symbols), 300_000+300)
	}
	// a Symbols slice set from outside is indexed again
	m.Symbols = []string{"a", "b"}
	m.AddSymbol("a")
	if len(m.Symbols) != 2 {
		t.Fatalf("symbols %v after adding a again", m.Symbols)
	}
}
