package tune

import (
	"context"
	"errors"
	"testing"
)

// stoppingGate admits every measurement; the first one's context has already ended
// (a request arrived as it started).
type stoppingGate struct{ acquired int }

func (g *stoppingGate) Acquire(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	g.acquired++
	c, cancel := context.WithCancel(ctx)
	if g.acquired == 1 {
		cancel()
	}
	return c, cancel, nil
}

// ctxMeasurer answers unless its context has ended.
type ctxMeasurer struct{ calls int }

func (m *ctxMeasurer) Measure(ctx context.Context, req Request) (*Response, error) {
	m.calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Response{Target: "t", Results: make([]Result, len(req.Assignments))}, nil
}

// TestGatedMeasuresAgainWhatTheGateStopped: a measurement the gate stops is never
// returned; it is measured again at the next admission. The caller's own cancellation
// is returned as it is.
func TestGatedMeasuresAgainWhatTheGateStopped(t *testing.T) {
	m, g := &ctxMeasurer{}, &stoppingGate{}
	gm := &Gated{Measurer: m, Gate: g}
	resp, err := gm.Measure(context.Background(), Request{Assignments: []Assignment{{}}})
	if err != nil || resp == nil {
		t.Fatalf("Measure: %v", err)
	}
	if m.calls != 2 || gm.Pauses() != 1 {
		t.Errorf("%d measurements and %d pauses, want the stopped one measured again (2, 1)", m.calls, gm.Pauses())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gm.Measure(ctx, Request{Assignments: []Assignment{{}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v, want context.Canceled", err)
	}
}
