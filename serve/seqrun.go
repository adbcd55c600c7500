package serve

import (
	"errors"
	"fmt"
	"time"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// run executes one batch of sequence requests on an instance of p's device: the
// client inputs joined by rows, the control inputs and the sequences' states added,
// one run, the state outputs kept for the sequences' next requests and the other
// outputs split back to the requests.
func (b *seqBatcher) run(p *placement, rows []seqRow) {
	defer func() { b.m.slots <- p }()
	m, size := b.m, len(rows)
	var (
		outs  []*tensor.Tensor
		state [][]*tensor.Tensor // per row, per spec.states
		res   batchResult
		begin = time.Now() // the requests' queue time ends here
	)
	args, shapes, err := b.join(rows)
	res.input = time.Since(begin)
	if err == nil {
		var v *variant
		v, res.compileWait, err = m.variantWaiting(m.svc.ctx, p, shapes)
		if err == nil {
			start := time.Now()
			var rewait time.Duration
			outs, v, rewait, err = m.runVariant(m.svc.ctx, p, v, shapes, args)
			res.compute = time.Since(start) - rewait
			res.compileWait += rewait
			p.runs.Add(1)
			res.outIdx, res.batch, res.device = v.outIdx, size, p.dev.name
			switch {
			case classified(err):
			case errors.Is(err, vm.ErrInput):
				err = fmt.Errorf("%w: %v", ErrInvalid, err)
			case err != nil:
				err = fmt.Errorf("%w: model %q%s: %v", ErrInternal, m.name, p.dev.on, err)
			default:
				t1 := time.Now()
				state, err = b.split(rows, outs, v)
				res.output = time.Since(t1)
				m.stats.execution(size, res.input, res.compute, res.output)
			}
		}
	}
	now := time.Now()
	b.mu.Lock()
	for i, r := range rows {
		if r.s == nil {
			continue
		}
		if err == nil {
			r.s.state = state[i]
		}
		r.s.running, r.s.idleSince = false, now
		if r.s.ended && len(r.s.queue) == 0 {
			b.free(r.s)
		}
	}
	b.mu.Unlock()
	b.wake()
	for i, r := range rows {
		if r.st == nil {
			continue
		}
		if err != nil {
			r.st.done <- batchResult{err: err}
			continue
		}
		t1 := time.Now()
		mine := make([]*tensor.Tensor, len(outs))
		for k, o := range outs {
			mine[k] = o
			if b.spec.batch {
				mine[k] = sliceRows(o, i, 1)
			}
		}
		rr := res
		rr.outs, rr.queued = mine, begin.Sub(r.st.enq)
		rr.output += time.Since(t1)
		r.st.done <- rr
	}
}

// join builds the model's inputs for a batch, in the model's order, and their shapes.
func (b *seqBatcher) join(rows []seqRow) ([]*tensor.Tensor, map[string][]int64, error) {
	m, size := b.m, len(rows)
	var first *seqRow // a row with a request: padding rows copy its shapes
	for i := range rows {
		if rows[i].s != nil {
			first = &rows[i]
			break
		}
	}
	if first == nil {
		panic("BUG: a sequence batch without a request")
	}
	args := make([]*tensor.Tensor, len(m.iface.Inputs))
	shapes := map[string][]int64{}
	for i, in := range m.iface.Inputs {
		var t *tensor.Tensor
		var err error
		if c, ok := b.ctlOf[in.Name]; ok {
			ctl := b.spec.controls[c]
			t, err = ctl.tensor(size, b.spec.batch, func(r int) bool {
				switch st := rows[r].st; {
				case st == nil:
					return false
				case ctl.kind == ctlStart:
					return st.start
				case ctl.kind == ctlEnd:
					return st.end
				}
				return true // READY
			}, func(r int) *seqID {
				if rows[r].s == nil {
					return nil
				}
				return &rows[r].s.id
			})
		} else {
			k, isState := b.spec.stateInput[in.Name]
			row := func(r seqRow) *tensor.Tensor {
				if isState {
					return r.s.state[k]
				}
				return r.st.args[i]
			}
			if !b.spec.batch {
				t = row(*first)
			} else {
				parts := make([]*tensor.Tensor, size)
				for r := range rows {
					if rows[r].s == nil {
						parts[r] = tensor.New(row(*first).DType, row(*first).Shape)
					} else {
						parts[r] = row(rows[r])
					}
					if isState { // a state is kept without the batch dim
						parts[r], err = parts[r].Reshape(append(tensor.Shape{1}, parts[r].Shape...))
						if err != nil {
							break
						}
					}
				}
				if err == nil {
					t, err = concatRows(parts, size)
				}
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: model %q: input %q: %v", ErrInvalid, m.name, in.Name, err)
		}
		args[i] = t
		shape := make([]int64, len(t.Shape))
		for k, d := range t.Shape {
			shape[k] = int64(d)
		}
		shapes[in.Name] = shape
	}
	return args, shapes, nil
}

// split takes the state outputs of a batch's rows, without the batch dim.
func (b *seqBatcher) split(rows []seqRow, outs []*tensor.Tensor, v *variant) ([][]*tensor.Tensor, error) {
	m := b.m
	if b.spec.batch {
		for i, o := range outs {
			if len(o.Shape) == 0 || o.Shape[0] != len(rows) {
				return nil, fmt.Errorf("%w: model %q: output %q has shape %v, no batch dimension of %d: its sequences cannot be batched (set max_batch_size: 0)",
					ErrInternal, m.name, v.outputs[i], o.Shape, len(rows))
			}
		}
	}
	state := make([][]*tensor.Tensor, len(rows))
	for r := range rows {
		if rows[r].s == nil {
			continue
		}
		state[r] = make([]*tensor.Tensor, len(b.spec.states))
		for k, ss := range b.spec.states {
			idx, ok := v.outIdx[ss.output]
			if !ok {
				return nil, fmt.Errorf("%w: model %q has no state output %q", ErrInternal, m.name, ss.output)
			}
			o := outs[idx]
			if b.spec.batch {
				var err error
				if o, err = sliceRows(o, r, 1).Reshape(o.Shape[1:].Clone()); err != nil {
					return nil, fmt.Errorf("%w: model %q: state output %q: %v", ErrInternal, m.name, ss.output, err)
				}
			}
			state[r][k] = o
		}
	}
	return state, nil
}
