package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// State is a model version's lifecycle state, with Triton's names.
type State string

const (
	StateUnavailable State = "UNAVAILABLE" // not loaded, or failed (Reason says why)
	StateLoading     State = "LOADING"     // compiling (Progress says where)
	StateReady       State = "READY"       // servable
)

// model is one version of a model: its interface, its instances on their devices with
// the executables loaded there (one per input shape signature, or one for every
// shape), and its stats.
type model struct {
	svc     *Service
	name    string
	version int64
	path    string
	src     *engine.Model // the files as read once: digest (the journal key's model part), stamp
	iface   *onnx.Interface
	sig     *graph.Module
	spec    *Spec
	config  *modelpb.ModelConfig // nil when the model could not be read
	given   *modelpb.ModelConfig // the configuration given to the load API (nil: config.pbtxt); a reload keeps it
	stats   *modelStats
	places  []*placement    // the devices its instances run on
	slots   chan *placement // the free instances (each names its device): requests beyond them queue
	batcher *batcher        // nil: every request is its own execution
	seq     *seqBatcher     // sequence_batching (seqbatch.go); nil: none

	mu       sync.Mutex
	retired  bool // unloaded or replaced: no new requests
	warming  bool // running its warm-up samples: stays LOADING
	startup  bool // compiles (or warms up) at load, not yet started (startup.go)
	gates    bool // the server's readiness waits for its load at start (eager, warm-up)
	dormant  bool // listed but not meant to serve (explicit control): readiness ignores it
	active   int  // requests in progress
	state    State
	reason   string
	progress string
}

// variant is the executable for one input shape signature, loaded on the device.
type variant struct {
	machine engine.Runner
	outputs []string // the results' names, in order
	outIdx  map[string]int
}

func (m *model) versionString() string {
	if m.version < 0 { // the placeholder of an unloaded model
		return ""
	}
	return strconv.FormatInt(m.version, 10)
}

// takeStartup reports whether the model has a load at start not yet begun, and clears
// it.
func (m *model) takeStartup() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.startup
	m.startup = false
	return e
}

func (m *model) setState(s State, reason string) {
	m.mu.Lock()
	m.state, m.reason = s, reason
	m.mu.Unlock()
}

// Status reports a model version's state.
type Status struct {
	Name, Version string
	State         State
	Reason        string // why unavailable, or the compile's progress while loading
	Compiled      int    // executables loaded (per device: one per input shape signature served, and the generic one)
}

func (m *model) status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Name: m.name, Version: m.versionString(), State: m.state, Reason: m.reason}
	for _, p := range m.places {
		st.Compiled += len(p.variants)
		if p.generic != nil {
			st.Compiled++
		}
	}
	if m.state == StateLoading && m.progress != "" {
		st.Reason = m.progress
	}
	return st
}

// checkInputs validates a request's inputs against the model's interface and returns
// them in parameter order with their shapes.
func (m *model) checkInputs(req *InferRequest) ([]*tensor.Tensor, map[string][]int64, error) {
	byName := map[string]*Tensor{}
	for i := range req.Inputs {
		in := &req.Inputs[i]
		if _, dup := byName[in.Name]; dup {
			return nil, nil, fmt.Errorf("%w: input %q given twice", ErrInvalid, in.Name)
		}
		byName[in.Name] = in
	}
	args := make([]*tensor.Tensor, len(m.iface.Inputs))
	shapes := map[string][]int64{}
	for i, p := range m.iface.Inputs {
		if m.seq != nil && m.seq.spec.fills[p.Name] {
			continue // given by the sequence batcher
		}
		in, ok := byName[p.Name]
		if !ok && p.Default != nil && m.spec.optional[p.Name] {
			args[i], shapes[p.Name] = p.Default, shapeOf(p.Default)
			continue
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: model %q needs input %q (%s), which the request lacks", ErrInvalid, m.name, p.Name, describe(p.Type))
		}
		delete(byName, p.Name)
		if in.Data == nil {
			return nil, nil, fmt.Errorf("%w: input %q has no data", ErrInvalid, p.Name)
		}
		if in.Data.DType != p.Type.DType {
			return nil, nil, fmt.Errorf("%w: input %q is %s, model %q takes %s", ErrInvalid, p.Name, in.Datatype, m.name, Datatype(p.Type.DType))
		}
		if !p.Type.UnknownRank {
			if len(in.Shape) != len(p.Type.Shape) {
				return nil, nil, fmt.Errorf("%w: input %q has shape %v, model %q takes %s", ErrInvalid, p.Name, in.Shape, m.name, describe(p.Type))
			}
			for k, d := range p.Type.Shape {
				if v, ok := d.Value(); ok && v != in.Shape[k] {
					return nil, nil, fmt.Errorf("%w: input %q has shape %v, model %q takes %s", ErrInvalid, p.Name, in.Shape, m.name, describe(p.Type))
				}
			}
		}
		args[i] = in.Data
		shapes[p.Name] = in.Shape
	}
	for name := range byName {
		return nil, nil, fmt.Errorf("%w: model %q has no input %q", ErrInvalid, m.name, name)
	}
	if m.seq != nil {
		return args, shapes, nil // checked with the server's inputs (seqBatcher.enqueue)
	}
	if _, err := engine.DimsFromShapes(m.sig, shapes); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return args, shapes, nil
}

// shapeOf is a tensor's shape as the protocol writes it.
func shapeOf(t *tensor.Tensor) []int64 {
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		out[i] = int64(d)
	}
	return out
}

// describe prints a declared type as OIP datatype and shape with -1 for free dims.
func describe(t graph.Type) string {
	return fmt.Sprintf("%s%v", Datatype(t.DType), dimsOf(t))
}

func dimsOf(t graph.Type) []int64 {
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		if v, ok := d.Value(); ok {
			out[i] = v
		} else {
			out[i] = -1
		}
	}
	return out
}

// variantFor returns the executable for the shapes loaded on p's device, compiling it
// (through the journal: once per key across processes; here once per key and device
// per process) if needed. The compile stops when every request waiting for it has
// given up.
func (m *model) variantFor(ctx context.Context, p *placement, shapes map[string][]int64) (*variant, error) {
	v, _, err := m.variantKeyed(ctx, p, shapes, shapesKey(shapes))
	return v, err
}

// variantWaiting is variantFor for a request's execution: it also reports how long the
// caller waited for a compile, its own or one already running (a load at start,
// another request's; 0 when the executable was loaded already), and counts the
// execution for background tuning (loads at start and warm-up samples do not).
func (m *model) variantWaiting(ctx context.Context, p *placement, shapes map[string][]int64) (*variant, time.Duration, error) {
	key := shapesKey(shapes)
	m.svc.tuner.saw(m, shapes, key)
	return m.variantKeyed(ctx, p, shapes, key)
}

func (m *model) variantKeyed(ctx context.Context, p *placement, shapes map[string][]int64, key string) (*variant, time.Duration, error) {
	m.mu.Lock()
	v := p.variants[key]
	m.mu.Unlock()
	if v != nil {
		return v, 0, nil
	}
	start := time.Now()
	waited := func() time.Duration { return max(time.Since(start), time.Nanosecond) }
	if g, compiled, err := m.genericFor(ctx, p, shapes, key); g != nil || err != nil {
		if !compiled {
			return g, 0, err
		}
		return g, waited(), err
	}
	v, err := p.flights.do(ctx, m.svc.ctx, key, func(bctx context.Context) (*variant, error) { return m.build(bctx, p, shapes, key) })
	if err == errGaveUp {
		return nil, waited(), fmt.Errorf("%w: waiting for model %q to compile: %v", ErrDeadline, m.name, ctx.Err())
	}
	return v, waited(), err
}

// shapesKey names a shape signature among a placement's variants: what fmt.Sprint
// prints for the map (names sorted, "map[a:[1 2] b:[3]]"), written without reflection,
// since every request computes it.
func shapesKey(shapes map[string][]int64) string {
	names := make([]string, 0, len(shapes))
	for name := range shapes {
		names = append(names, name)
	}
	slices.Sort(names)
	b := make([]byte, 0, 64)
	b = append(b, "map["...)
	for i, name := range names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, name...)
		b = append(b, ":["...)
		for k, d := range shapes[name] {
			if k > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// build compiles (or loads from the journal), loads and registers the variant for one
// shape signature on p's device, under the flight's context (see flights).
func (m *model) build(ctx context.Context, p *placement, shapes map[string][]int64, key string) (*variant, error) {
	v, err := m.buildVariant(ctx, p, shapes, key)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	p.variants[key] = v
	m.mu.Unlock()
	return v, nil
}

// errChanged: the model's files are not the ones registered (replaced on disk); the
// service reloads the model and the request runs on the new content. It wraps
// ErrUnavailable for a request that still sees it.
var errChanged = fmt.Errorf("%w: the model's files changed on disk", ErrUnavailable)

// buildVariant compiles (or loads from the journal) and loads an executable on p's
// device: for the shapes, or with shapes nil the generic one (symbolic dims left free).
// The journal key is the digest taken at registration (and the device's target), and
// the compile reads the files again only to import exactly those bytes
// (onnx.LoadVerified): files replaced since then are errChanged, never compiled under
// the old key. A failed first compile on a device makes the model UNAVAILABLE (the
// reason names the device unless it is the CPU), unless it was the generic attempt (the
// model then compiles per shape), it was cancelled, the files changed, or the shapes of
// a request of a model with free dims do not type (ErrInvalid: that request's fault).
func (m *model) buildVariant(ctx context.Context, p *placement, shapes map[string][]int64, key string) (*variant, error) {
	svc := m.svc
	generic := shapes == nil
	if m.src.Stamp.Changed() {
		return nil, fmt.Errorf("%w: model %q version %d", errChanged, m.name, m.version)
	}
	first, firstHere := false, false
	m.mu.Lock()
	firstHere = p.empty() && !generic
	if m.loadedNowhere() {
		first = !generic
		m.state, m.reason = StateLoading, ""
	}
	m.mu.Unlock()
	undo := func() { // nothing was learned about the model: back to where it was
		if first {
			m.mu.Lock()
			if m.state == StateLoading && !m.warming {
				m.state, m.progress = StateReady, ""
			}
			m.mu.Unlock()
		}
	}
	if !svc.startBuild() {
		return nil, fmt.Errorf("%w: model %q: the server is stopping", ErrUnavailable, m.name)
	}
	defer svc.building.Done()
	select { // a bounded number of compiles at once (Options.Compiles)
	case svc.compiles <- struct{}{}:
	case <-ctx.Done():
		undo()
		return nil, fmt.Errorf("%w: model %q: compile cancelled: %v", ErrDeadline, m.name, ctx.Err())
	}
	defer func() { <-svc.compiles }()
	start := time.Now()
	var shapesOrGeneric map[string][]int64 // nil: the generic executable
	if !generic {
		shapesOrGeneric = shapes
	}
	on := p.dev.on
	c, err := p.dev.engine.Load(ctx, m.src, shapesOrGeneric, func(pr engine.Progress) {
		m.mu.Lock()
		if pr.Total > 0 {
			m.progress = fmt.Sprintf("compiling%s: %s %d/%d", on, pr.Stage, pr.Done, pr.Total)
		} else {
			m.progress = fmt.Sprintf("compiling%s: %s", on, pr.Stage)
		}
		m.mu.Unlock()
	})
	if err != nil {
		switch {
		case errors.Is(err, onnx.ErrChanged):
			undo()
			return nil, fmt.Errorf("%w: model %q version %d: %v", errChanged, m.name, m.version, err)
		case ctx.Err() != nil:
			undo()
			return nil, fmt.Errorf("%w: model %q: compile cancelled: %v", ErrDeadline, m.name, ctx.Err())
		}
		if !generic && errors.Is(err, graph.ErrInfer) && m.hasSymbolicInputs() {
			// the request's shapes bound the free dims and a node does not type with
			// them (operands that cannot broadcast): the request is wrong, not the model
			undo()
			return nil, fmt.Errorf("%w: model %q: the input shapes %v do not fit the model: %v", ErrInvalid, m.name, shapes, err)
		}
		if !generic && errors.Is(err, engine.ErrNotPrebuilt) {
			m.mu.Lock()
			noGen := p.noGen
			m.mu.Unlock()
			if noGen != "" { // the generic executable was looked for first: say so too
				err = fmt.Errorf("%w (the generic executable for every shape is not there either)", err)
			}
		}
		reason := fmt.Sprintf("compile failed%s: %v", on, err)
		if !generic {
			svc.log.Error("model compile failed", zap.String("model", m.name), zap.Int64("version", m.version), zap.String("device", p.dev.name),
				zap.Any("shapes", shapes), zap.Error(err))
		}
		if firstHere {
			m.setState(StateUnavailable, reason)
		}
		return nil, fmt.Errorf("%w: model %q%s: %v", ErrUnavailable, m.name, on, err)
	}
	v := &variant{machine: c.Runner, outputs: c.Outputs, outIdx: map[string]int{}}
	for i, o := range c.Outputs {
		v.outIdx[o] = i
	}
	svc.stats.compile(m.name, c.Built, time.Since(start))
	svc.compileHist.WithLabelValues(m.name, c.Outcome.String()).Observe(time.Since(start).Seconds())
	svc.log.Info("model compiled", zap.String("model", m.name), zap.Int64("version", m.version), zap.String("device", p.dev.name), zap.Any("shapes", shapes),
		zap.String("journal", c.Outcome.String()), zap.Stringer("miss", c.Miss.Kind), zap.Duration("took", time.Since(start)))
	m.mu.Lock()
	// warm-up turns the model READY when its samples have run; a failed first compile
	// on another device has made it UNAVAILABLE for good
	if !m.warming && m.state != StateUnavailable {
		m.state, m.reason = StateReady, ""
	}
	m.progress = ""
	m.mu.Unlock()
	return v, nil
}

// loadedNowhere reports whether no device has an executable of the model (m.mu held).
func (m *model) loadedNowhere() bool {
	for _, p := range m.places {
		if !p.empty() {
			return false
		}
	}
	return true
}

// infer runs one request on the model.
func (m *model) infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	m.mu.Lock()
	state, reason := m.state, m.reason
	m.mu.Unlock()
	if state == StateUnavailable {
		return nil, fmt.Errorf("%w: model %q version %d is not available: %s", ErrUnavailable, m.name, m.version, reason)
	}
	if m.seq != nil {
		return m.inferSequence(ctx, req)
	}
	t0 := time.Now()
	args, shapes, err := m.checkInputs(req)
	if err != nil {
		return nil, err
	}
	outs, err := m.outputs(req)
	if err != nil {
		return nil, err
	}
	input := time.Since(t0)
	if m.batcher != nil {
		return m.inferBatched(ctx, req, args, outs, input)
	}
	start := time.Now()
	var p *placement // the first free instance, of whichever device
	m.stats.waiting.Add(1)
	select {
	case p = <-m.slots:
		m.stats.waiting.Add(-1)
	case <-ctx.Done():
		m.stats.waiting.Add(-1)
		return nil, fmt.Errorf("%w: queued for model %q: %v", ErrDeadline, m.name, ctx.Err())
	}
	queued := time.Since(start)
	v, wait, err := m.variantWaiting(ctx, p, shapes) // the compile is neither queue nor compute time
	if err != nil {
		m.slots <- p
		return nil, err
	}
	run := time.Now()
	res, v, rewait, err := m.runVariant(ctx, p, v, shapes, args)
	m.slots <- p
	compute := time.Since(run) - rewait
	wait += rewait
	p.runs.Add(1)
	if err != nil {
		if classified(err) {
			return nil, err
		}
		if errors.Is(err, vm.ErrInput) {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %v", ErrDeadline, err)
		}
		return nil, fmt.Errorf("%w: model %q%s: %v", ErrInternal, m.name, p.dev.on, err)
	}
	t1 := time.Now()
	resp, err := m.response(req, outs, res, v.outIdx)
	if err != nil {
		return nil, err
	}
	output := time.Since(t1)
	rows := m.inferences(args)
	m.stats.execution(int(rows), input, compute, output)
	resp.Device, resp.CompileWait = p.dev.name, wait
	resp.timing = requestTiming{queued: queued, input: input, compute: compute, output: output, inferences: rows}
	return resp, nil
}

// inferences is what a request counts in InferenceCount: its rows for a model with a
// batch dim (max_batch_size > 0), else 1.
func (m *model) inferences(args []*tensor.Tensor) int64 {
	if m.spec.MaxBatchSize > 0 && len(args) > 0 && len(args[0].Shape) > 0 {
		return int64(args[0].Shape[0])
	}
	return 1
}

// inferBatched hands a request to the batcher, at the priority and with the queue
// timeout its parameters ask for, and waits for its rows.
func (m *model) inferBatched(ctx context.Context, req *InferRequest, args []*tensor.Tensor, outs []string, input time.Duration) (*InferResponse, error) {
	qr, err := queueingOf(req.Params)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", m.name, err)
	}
	rows, key, err := batchKey(args, m.batcher.spec.MaxBatchSize)
	if err != nil {
		return nil, fmt.Errorf("%w: model %q batches requests: %v", ErrInvalid, m.name, err)
	}
	r := m.batcher.submit(ctx, &pending{args: args, rows: rows, key: key}, qr)
	if r.err != nil {
		return nil, r.err
	}
	t1 := time.Now()
	resp, err := m.response(req, outs, r.outs, r.outIdx)
	if err != nil {
		return nil, err
	}
	resp.Device, resp.CompileWait = r.device, r.compileWait
	resp.timing = requestTiming{queued: r.queued, input: input + r.input, compute: r.compute, output: r.output + time.Since(t1), inferences: int64(rows)}
	return resp, nil
}

// response picks the requested outputs.
func (m *model) response(req *InferRequest, outs []string, res []*tensor.Tensor, outIdx map[string]int) (*InferResponse, error) {
	resp := &InferResponse{Model: m.name, Version: m.versionString(), ID: req.ID}
	for _, name := range outs {
		i, ok := outIdx[name]
		if !ok {
			return nil, fmt.Errorf("%w: model %q has no output %q", ErrInvalid, m.name, name)
		}
		t := res[i]
		shape := make([]int64, len(t.Shape))
		for k, d := range t.Shape {
			shape[k] = int64(d)
		}
		resp.Outputs = append(resp.Outputs, Tensor{Name: name, Datatype: Datatype(t.DType), Shape: shape, Data: t})
	}
	return resp, nil
}

// outputs lists the requested output names (every output when none is asked for).
func (m *model) outputs(req *InferRequest) ([]string, error) {
	if len(req.Outputs) == 0 {
		var all []string
		for _, o := range m.iface.Outputs {
			all = append(all, o.Name)
		}
		return all, nil
	}
	known := map[string]bool{}
	for _, o := range m.iface.Outputs {
		known[o.Name] = true
	}
	var out []string
	for _, o := range req.Outputs {
		if !known[o.Name] {
			return nil, fmt.Errorf("%w: model %q has no output %q", ErrInvalid, m.name, o.Name)
		}
		out = append(out, o.Name)
	}
	return out, nil
}
