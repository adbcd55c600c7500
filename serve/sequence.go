package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// What a sequence_batching configuration asks of the server (seqbatch.go runs it):
// the request parameters that place a request in its sequence, the control tensors
// and the implicit state the server feeds the model.

// ParamSequenceID is the request parameter naming a request's sequence (Triton's
// correlation ID): a uint64 or a string.
const ParamSequenceID = "sequence_id"

// The request parameters that start and end a sequence (Triton's names).
const (
	paramSequenceID    = ParamSequenceID
	paramSequenceStart = "sequence_start"
	paramSequenceEnd   = "sequence_end"
)

// defaultSequenceIdle is how long a sequence may go without a request when the
// configuration leaves max_sequence_idle_microseconds 0 (Triton's default).
const defaultSequenceIdle = time.Second

// maxStateFileBytes bounds an initial_state data file.
const maxStateFileBytes = 256 << 20

// seqID is a sequence's correlation ID: a non-zero number or a non-empty string.
type seqID struct {
	num   uint64
	str   string
	isStr bool
}

func (id seqID) String() string {
	if id.isStr {
		return id.str
	}
	return strconv.FormatUint(id.num, 10)
}

// seqParams is where a request stands in its sequence.
type seqParams struct {
	id         seqID
	start, end bool
}

// sequenceParams reads a request's sequence parameters: sequence_id a uint64 (gRPC's
// uint64_param or int64_param, a JSON number that is an exact integer) or a string,
// sequence_start and sequence_end booleans.
func sequenceParams(model string, p map[string]any) (seqParams, error) {
	var sp seqParams
	switch v := p[paramSequenceID].(type) {
	case nil:
	case string:
		sp.id = seqID{str: v, isStr: true}
	case uint64:
		sp.id.num = v
	case int64:
		if v < 0 {
			return sp, fmt.Errorf("%w: model %q: %s %d is negative", ErrInvalid, model, paramSequenceID, v)
		}
		sp.id.num = uint64(v)
	case float64:
		if v < 0 || v != math.Trunc(v) || v > 1<<53 {
			return sp, fmt.Errorf("%w: model %q: %s %v is not an unsigned 64-bit integer", ErrInvalid, model, paramSequenceID, v)
		}
		sp.id.num = uint64(v)
	case json.Number:
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return sp, fmt.Errorf("%w: model %q: %s %s is not an unsigned 64-bit integer", ErrInvalid, model, paramSequenceID, v)
		}
		sp.id.num = n
	default:
		return sp, fmt.Errorf("%w: model %q: %s must be an unsigned integer or a string, not %T", ErrInvalid, model, paramSequenceID, v)
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{{paramSequenceStart, &sp.start}, {paramSequenceEnd, &sp.end}} {
		switch v := p[f.name].(type) {
		case nil:
		case bool:
			*f.dst = v
		default:
			return sp, fmt.Errorf("%w: model %q: %s must be a boolean, not %T", ErrInvalid, model, f.name, v)
		}
	}
	if sp.id == (seqID{}) || sp.id == (seqID{isStr: true}) {
		// Triton's words
		return sp, fmt.Errorf("%w: inference request to model '%s' must specify a non-zero or non-empty correlation ID", ErrInvalid, model)
	}
	return sp, nil
}

const (
	ctlStart = modelpb.ModelSequenceBatching_Control_CONTROL_SEQUENCE_START
	ctlEnd   = modelpb.ModelSequenceBatching_Control_CONTROL_SEQUENCE_END
	ctlCorr  = modelpb.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID
)

// seqControl is one control input.
type seqControl struct {
	input       string
	kind        modelpb.ModelSequenceBatching_Control_Kind
	dtype       tensor.DType
	falseV, trV float64 // the false and true values (not CORRID)
	rank        int     // the model input's rank, the batch dim included
}

// seqState is one implicit state: the model's input and output and the value it
// starts from (without the batch dim).
type seqState struct {
	input, output string
	initial       *tensor.Tensor
}

// seqSpec is a model's sequence_batching configuration, resolved.
type seqSpec struct {
	batch      bool // the model batches (max_batch_size > 0): tensors have a batch dim
	maxBatch   int  // rows in one execution (1 when the model does not batch)
	idle       time.Duration
	oldest     bool
	places     int // direct: slots (lanes × maxBatch); oldest: candidate sequences
	delay      time.Duration
	minUtil    float64 // direct: a lane runs once this share of its slots is ready
	preferred  []int   // oldest: batch sizes that run at once
	controls   []seqControl
	states     []seqState
	fills      map[string]bool // the model inputs the server gives
	keeps      map[string]bool // the model outputs the server keeps
	stateInput map[string]int  // model input → index in states
}

// dtypeOf is a configured data type's element type.
func dtypeOf(dt modelpb.DataType) (tensor.DType, bool) {
	name, ok := modelrepo.DataTypeToOIP(dt)
	if !ok {
		return 0, false
	}
	return modelrepo.DTypeFromOIP(name)
}

// seqSpecOf resolves a model's sequence_batching configuration; dir is the model's
// folder (initial_state data files are read from its initial_state folder).
func seqSpecOf(m *model, c *modelpb.ModelConfig, dir string) (*seqSpec, error) {
	sb := c.GetSequenceBatching()
	sp := &seqSpec{batch: c.MaxBatchSize > 0, maxBatch: max(int(c.MaxBatchSize), 1), idle: defaultSequenceIdle,
		fills: modelrepo.SequenceInputs(c), keeps: modelrepo.SequenceOutputs(c), stateInput: map[string]int{}}
	if us := sb.GetMaxSequenceIdleMicroseconds(); us > 0 {
		sp.idle = time.Duration(min(us, uint64(math.MaxInt64/1000))) * time.Microsecond
	}
	instances := max(m.spec.Instances, 1)
	sp.places = sp.maxBatch * instances
	switch s := sb.GetStrategyChoice().(type) {
	case *modelpb.ModelSequenceBatching_Oldest:
		sp.oldest = true
		if n := s.Oldest.GetMaxCandidateSequences(); n > 0 {
			sp.places = int(n)
		}
		sp.delay = time.Duration(s.Oldest.GetMaxQueueDelayMicroseconds()) * time.Microsecond
		for _, n := range s.Oldest.GetPreferredBatchSize() {
			sp.preferred = append(sp.preferred, int(n))
		}
		slices.Sort(sp.preferred)
	case *modelpb.ModelSequenceBatching_Direct:
		sp.delay = time.Duration(s.Direct.GetMaxQueueDelayMicroseconds()) * time.Microsecond
		sp.minUtil = float64(s.Direct.GetMinimumSlotUtilization())
	}
	rankOf := func(name string) int {
		for _, p := range m.iface.Inputs {
			if p.Name == name && !p.Type.UnknownRank {
				return len(p.Type.Shape)
			}
		}
		if sp.batch {
			return 2 // Triton's [batch, 1]
		}
		return 1
	}
	for _, ci := range sb.GetControlInput() {
		for _, ctl := range ci.GetControl() {
			dt, ok := dtypeOf(modelrepo.ControlType(ctl))
			if !ok {
				return nil, fmt.Errorf("%w: sequence_batching: control input %q has no element type", modelrepo.ErrModelConfig, ci.GetName())
			}
			sc := seqControl{input: ci.GetName(), kind: ctl.GetKind(), dtype: dt, rank: rankOf(ci.GetName())}
			if sp.batch && sc.rank == 0 {
				return nil, fmt.Errorf("%w: sequence_batching: control input %q is a scalar in the model: it has no batch dimension", modelrepo.ErrModelConfig, ci.GetName())
			}
			switch {
			case len(ctl.GetInt32FalseTrue()) == 2:
				sc.falseV, sc.trV = float64(ctl.GetInt32FalseTrue()[0]), float64(ctl.GetInt32FalseTrue()[1])
			case len(ctl.GetFp32FalseTrue()) == 2:
				sc.falseV, sc.trV = float64(ctl.GetFp32FalseTrue()[0]), float64(ctl.GetFp32FalseTrue()[1])
			case len(ctl.GetBoolFalseTrue()) == 2:
				sc.falseV, sc.trV = b2f(ctl.GetBoolFalseTrue()[0]), b2f(ctl.GetBoolFalseTrue()[1])
			}
			sp.controls = append(sp.controls, sc)
		}
	}
	for i, st := range sb.GetState() {
		dt, ok := dtypeOf(st.GetDataType())
		if !ok {
			return nil, fmt.Errorf("%w: sequence_batching.state[%d]: no element type", modelrepo.ErrModelConfig, i)
		}
		dims := st.GetDims()
		var raw []byte
		if is := st.GetInitialState(); len(is) > 0 {
			dims = is[0].GetDims()
			if f := is[0].GetDataFile(); f != "" {
				path, err := safefile.Within(dir, "initial_state/"+f)
				if err == nil {
					raw, err = safefile.ReadFile(path, maxStateFileBytes)
				}
				if err != nil {
					return nil, fmt.Errorf("%w: sequence_batching.state[%d].initial_state: %v", modelrepo.ErrModelConfig, i, err)
				}
			}
		}
		shape := make(tensor.Shape, len(dims))
		for k, d := range dims {
			shape[k] = int(d)
		}
		if _, err := shape.CheckedNumElements(maxElements); err != nil {
			return nil, fmt.Errorf("%w: sequence_batching.state[%d]: dims %v: %v", modelrepo.ErrModelConfig, i, dims, err)
		}
		init := tensor.New(dt, shape)
		if raw != nil {
			t, err := tensor.FromRaw(dt, shape, raw)
			if err != nil {
				return nil, fmt.Errorf("%w: sequence_batching.state[%d].initial_state: data file of %d bytes for %s%v: %v", modelrepo.ErrModelConfig, i, len(raw), dt, dims, err)
			}
			init = t
		}
		sp.stateInput[st.GetInputName()] = len(sp.states)
		sp.states = append(sp.states, seqState{input: st.GetInputName(), output: st.GetOutputName(), initial: init})
	}
	return sp, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// controlTensor is a control input's tensor for a batch: one value per row (rows is
// the batch size; a model that does not batch gets one value without a batch dim),
// of the model input's rank with every dim but the first 1. flag gives a row's flag
// (not CORRID); id its sequence (nil: a padding row).
func (c seqControl) tensor(rows int, batch bool, flag func(row int) bool, id func(row int) *seqID) (*tensor.Tensor, error) {
	shape := make(tensor.Shape, c.rank)
	for i := range shape {
		shape[i] = 1
	}
	if batch {
		shape[0] = rows
	}
	if c.kind != ctlCorr {
		v := make([]float64, rows)
		for r := range v {
			v[r] = c.falseV
			if flag(r) {
				v[r] = c.trV
			}
		}
		return tensor.FromFloat64s(c.dtype, shape, v), nil
	}
	if c.dtype == tensor.String {
		v := make([]string, rows)
		for r := range v {
			if s := id(r); s != nil {
				v[r] = s.String()
			}
		}
		return tensor.FromSlice(shape, v)
	}
	v := make([]int64, rows)
	for r := range v {
		s := id(r)
		switch {
		case s == nil:
		case s.isStr:
			return nil, fmt.Errorf("%w: sequence %q has a string correlation ID; the model's %s control input %q takes %s", ErrInvalid, s.str, c.kind, c.input, Datatype(c.dtype))
		default:
			v[r] = int64(s.num) // UINT64 keeps every bit, a 32-bit type the low 32 (as Triton)
		}
	}
	return tensor.FromInt64s(c.dtype, shape, v), nil
}
