package serve

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

// orderEngine is the reference engine that records, per run, the first element of
// the first input: the tests mark each request with it to see the order of execution.
type orderEngine struct {
	*servetest.Engine
	mu   sync.Mutex
	runs []float32
}

func (e *orderEngine) Load(ctx context.Context, m *engine.Model, shapes map[string][]int64, progress func(engine.Progress)) (*engine.Loaded, error) {
	l, err := e.Engine.Load(ctx, m, shapes, progress)
	if err != nil {
		return nil, err
	}
	l.Runner = &orderRunner{Runner: l.Runner, e: e}
	return l, nil
}

func (e *orderEngine) order() []float32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runs)
}

type orderRunner struct {
	engine.Runner
	e *orderEngine
}

func (r *orderRunner) Run(ctx context.Context, args []*tensor.Tensor) ([]*tensor.Tensor, error) {
	r.e.mu.Lock()
	r.e.runs = append(r.e.runs, args[0].Data.([]float32)[0])
	r.e.mu.Unlock()
	return r.Runner.Run(ctx, args)
}

// queueRepo is testRepo's repository with the mlp model configured by config (one
// instance), and the same model as "mlp2" with config2 when it is not empty.
func queueRepo(t *testing.T, config, config2 string) string {
	t.Helper()
	repo, _, _ := testRepo(t)
	writeConfig(t, repo, "mlp", config)
	if config2 != "" {
		src, err := os.ReadFile(filepath.Join(repo, "mlp", "1", "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(repo, "mlp2", "1"), 0o755)
		if err := os.WriteFile(filepath.Join(repo, "mlp2", "1", "model.onnx"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, repo, "mlp2", config2)
	}
	return repo
}

// marked is a one-row request to model whose first element is mark, with params.
func marked(model string, mark float32, params map[string]any) *InferRequest {
	x := tensor.New(tensor.Float32, tensor.Shape{1, 8})
	x.Data.([]float32)[0] = mark
	req := request(x)
	req.Model, req.Params = model, params
	return req
}

// holdInstance takes the model's only instance, as a long execution would, after one
// request has loaded its executable; the returned function gives it back.
func holdInstance(t *testing.T, s *Service, model string) (*model, func()) {
	t.Helper()
	if _, err := s.Infer(context.Background(), marked(model, -1, nil)); err != nil {
		t.Fatal(err)
	}
	m, err := s.lookup(model, "")
	if err != nil {
		t.Fatal(err)
	}
	p := <-m.slots
	return m, func() { m.slots <- p }
}

// waitQueued waits until the model's batcher holds n requests.
func waitQueued(t *testing.T, m *model, n int) {
	t.Helper()
	for range 500 {
		if m.batcher.queue.size() == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("the queue holds %d requests, want %d", m.batcher.queue.size(), n)
}

// inferAsync sends a request and returns where its error arrives.
func inferAsync(s *Service, req *InferRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Infer(context.Background(), req)
		done <- err
	}()
	return done
}

// TestFullQueueAnswersUnavailableAtOnce: with max_queue_size 2 and the instance busy,
// a third request fails at once with UNAVAILABLE and Triton's text, and the two queued
// ones are served once the instance is free.
func TestFullQueueAnswersUnavailableAtOnce(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching { default_queue_policy { max_queue_size: 2 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	m, release := holdInstance(t, s, "mlp")
	first, second := inferAsync(s, marked("mlp", 1, nil)), inferAsync(s, marked("mlp", 2, nil))
	waitQueued(t, m, 2)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Infer(ctx, marked("mlp", 3, nil))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Exceeds maximum queue size") {
		t.Fatalf("a request beyond max_queue_size: %v, want UNAVAILABLE: Exceeds maximum queue size", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %v: a full queue answers at once", took)
	}
	release()
	for _, done := range []<-chan error{first, second} {
		if err := <-done; err != nil {
			t.Errorf("a queued request: %v", err)
		}
	}
}

// TestQueueTimeoutRejectsWithTritonsError: a request that waits longer than
// default_timeout_microseconds (timeout_action REJECT) fails with UNAVAILABLE
// "Request timeout expired" while the instance is still busy.
func TestQueueTimeoutRejectsWithTritonsError(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 30000 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	_, release := holdInstance(t, s, "mlp")
	defer release()
	select {
	case err := <-inferAsync(s, marked("mlp", 1, nil)):
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Request timeout expired") {
			t.Fatalf("an expired request: %v, want UNAVAILABLE: Request timeout expired", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request past its queue timeout is still waiting")
	}
	st, _ := s.Stats("mlp", "")
	if st[0].Fail.Count != 1 || st[0].Pending != 0 {
		t.Errorf("statistics after the rejection: %d failures, %d pending; want 1 and 0", st[0].Fail.Count, st[0].Pending)
	}
}

// TestDelayActionRunsExpiredRequestAfterOthers: under timeout_action DELAY a request
// past its timeout is not refused: it runs after the requests of its level that have
// not expired, even those that came later.
func TestDelayActionRunsExpiredRequestAfterOthers(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching { default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 200000 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	e := &orderEngine{Engine: &servetest.Engine{}}
	s, _ := openOnDevices(t, repo, e)
	m, release := holdInstance(t, s, "mlp")
	late := inferAsync(s, marked("mlp", 1, nil))
	waitQueued(t, m, 1)
	time.Sleep(400 * time.Millisecond) // request 1 expires: delayed
	fresh := inferAsync(s, marked("mlp", 2, nil))
	waitQueued(t, m, 2)
	release()
	for _, done := range []<-chan error{late, fresh} {
		if err := <-done; err != nil {
			t.Fatalf("under DELAY: %v", err)
		}
	}
	if got := e.order(); !slices.Equal(got[len(got)-2:], []float32{2, 1}) {
		t.Fatalf("runs %v: the delayed request 1 ran before request 2", got)
	}
}

// TestHigherPriorityIsServedFirst: with two priority levels and the instance busy,
// the level-1 requests that arrive after level-2 ones run first; within a level,
// requests run in arrival order, and a request without a priority (or one past the
// levels) has default_priority_level.
func TestHigherPriorityIsServedFirst(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching { priority_levels: 2 default_priority_level: 2 }
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	e := &orderEngine{Engine: &servetest.Engine{}}
	s, _ := openOnDevices(t, repo, e)
	m, release := holdInstance(t, s, "mlp")
	var dones []<-chan error
	for i, params := range []map[string]any{nil, {"priority": float64(2)}, {"priority": int64(7)}, {"priority": uint64(1)}, {"priority": float64(1)}} {
		dones = append(dones, inferAsync(s, marked("mlp", float32(i+1), params)))
		waitQueued(t, m, i+1)
	}
	release()
	for _, done := range dones {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := e.order(); !slices.Equal(got[len(got)-5:], []float32{4, 5, 1, 2, 3}) {
		t.Fatalf("runs %v: want the priority-1 requests 4 and 5 first, then 1, 2, 3", got)
	}
	if _, err := s.Infer(context.Background(), marked("mlp", 0, map[string]any{"priority": float64(-1)})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a negative priority: %v, want ErrInvalid", err)
	}
}

// TestRequestTimeoutHonouredOnlyWithOverride: a request's "timeout" parameter
// (microseconds) shortens its queue timeout where allow_timeout_override is set, and
// is ignored where it is not.
func TestRequestTimeoutHonouredOnlyWithOverride(t *testing.T) {
	const config = `
max_batch_size: 1
dynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: %s } }
instance_group [ { count: 1 kind: KIND_CPU } ]
`
	repo := queueRepo(t, strings.Replace(config, "%s", "true", 1), strings.Replace(config, "%s", "false", 1))
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	short := map[string]any{"timeout": float64(20000)}

	_, release := holdInstance(t, s, "mlp")
	select {
	case err := <-inferAsync(s, marked("mlp", 1, short)):
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Request timeout expired") {
			t.Fatalf("allow_timeout_override: %v, want Request timeout expired", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("allow_timeout_override: the request's 20 ms timeout was not honoured")
	}
	release()

	m2, release2 := holdInstance(t, s, "mlp2")
	done := inferAsync(s, marked("mlp2", 1, short))
	waitQueued(t, m2, 1)
	time.Sleep(100 * time.Millisecond)
	if m2.batcher.queue.size() != 1 {
		t.Fatal("without allow_timeout_override the request's timeout was honoured")
	}
	release2()
	if err := <-done; err != nil {
		t.Fatalf("without allow_timeout_override: %v", err)
	}
}

// TestLevelPolicyOverridesDefault: a priority_queue_policy applies to its level only.
func TestLevelPolicyOverridesDefault(t *testing.T) {
	repo := queueRepo(t, `
max_batch_size: 1
dynamic_batching {
  priority_levels: 2 default_priority_level: 2
  priority_queue_policy { key: 1 value { max_queue_size: 1 } }
}
instance_group [ { count: 1 kind: KIND_CPU } ]
`, "")
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	m, release := holdInstance(t, s, "mlp")
	high := map[string]any{"priority": int64(1)}
	a, b, c := inferAsync(s, marked("mlp", 1, high)), inferAsync(s, marked("mlp", 2, nil)), inferAsync(s, marked("mlp", 3, nil))
	waitQueued(t, m, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Infer(ctx, marked("mlp", 4, high)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a second level-1 request beyond its level's max_queue_size 1: %v", err)
	}
	release()
	for _, done := range []<-chan error{a, b, c} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueueParametersAsEitherProtocolSendsThem: "priority" and "timeout" are read from
// JSON numbers and gRPC's integer parameters; anything but a non-negative integer is
// ErrInvalid naming the parameter.
func TestQueueParametersAsEitherProtocolSendsThem(t *testing.T) {
	for _, c := range []struct {
		params   map[string]any
		priority uint64
		timeout  time.Duration
	}{
		{nil, 0, 0},
		{map[string]any{"priority": float64(3), "timeout": float64(1500)}, 3, 1500 * time.Microsecond},
		{map[string]any{"priority": int64(2), "timeout": uint64(7)}, 2, 7 * time.Microsecond},
		{map[string]any{"priority": json.Number("4")}, 4, 0},
	} {
		got, err := queueingOf(c.params)
		if err != nil || got.priority != c.priority || got.timeout != c.timeout {
			t.Errorf("%v: %+v %v, want priority %d timeout %v", c.params, got, err, c.priority, c.timeout)
		}
	}
	for _, bad := range []map[string]any{{"priority": "high"}, {"priority": 1.5}, {"timeout": int64(-1)}, {"timeout": true}} {
		if _, err := queueingOf(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", bad, err)
		}
	}
	spec := BatchSpec{PriorityLevels: 3, DefaultPriority: 2}
	for priority, want := range map[uint64]int{0: 1, 1: 0, 3: 2, 4: 1, 1 << 40: 1} {
		if got := levelOf(spec, priority); got != want {
			t.Errorf("priority %d is level index %d, want %d", priority, got, want)
		}
	}
}
