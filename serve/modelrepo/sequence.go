package modelrepo

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// The sequence batcher's tensors: a control input and a state's input are model inputs
// the server fills, a state's output is a model output the server keeps; none is a
// configured input or output (clients neither send nor receive them), as in Triton.

// SequenceInputs lists the model inputs a sequence_batching configuration feeds from
// the server: its control inputs and its states' inputs.
func SequenceInputs(c *modelpb.ModelConfig) map[string]bool {
	out := map[string]bool{}
	sb := c.GetSequenceBatching()
	for _, ci := range sb.GetControlInput() {
		out[ci.GetName()] = true
	}
	for _, st := range sb.GetState() {
		out[st.GetInputName()] = true
	}
	return out
}

// SequenceOutputs lists the model outputs a sequence_batching configuration keeps as
// state.
func SequenceOutputs(c *modelpb.ModelConfig) map[string]bool {
	out := map[string]bool{}
	for _, st := range c.GetSequenceBatching().GetState() {
		out[st.GetOutputName()] = true
	}
	return out
}

// CorrIDTypes are the element types a CONTROL_SEQUENCE_CORRID control may have:
// Triton's integers (a 32-bit type carries the ID's low 32 bits) and TYPE_STRING for
// string correlation IDs.
var CorrIDTypes = []modelpb.DataType{modelpb.DataType_TYPE_UINT64, modelpb.DataType_TYPE_INT64,
	modelpb.DataType_TYPE_UINT32, modelpb.DataType_TYPE_INT32, modelpb.DataType_TYPE_STRING}

// ControlType is the element type of a control's tensor: data_type for a CORRID
// control, else the type of the false/true pair it sets (TYPE_INVALID when it sets
// none or several).
func ControlType(ctl *modelpb.ModelSequenceBatching_Control) modelpb.DataType {
	if ctl.GetKind() == modelpb.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID {
		return ctl.GetDataType()
	}
	var t []modelpb.DataType
	if len(ctl.GetInt32FalseTrue()) > 0 {
		t = append(t, modelpb.DataType_TYPE_INT32)
	}
	if len(ctl.GetFp32FalseTrue()) > 0 {
		t = append(t, modelpb.DataType_TYPE_FP32)
	}
	if len(ctl.GetBoolFalseTrue()) > 0 {
		t = append(t, modelpb.DataType_TYPE_BOOL)
	}
	if len(t) != 1 {
		return modelpb.DataType_TYPE_INVALID
	}
	return t[0]
}

// sequenceBatching applies Triton's rules to sequence_batching: one control per
// control input and each kind once, a CORRID of an integer or string type, the other
// kinds with exactly one false/true pair of two values, a state on an input no control
// uses with at most one initial state of its type and dims, the initial state's file
// inside the model's folder. Departures from Triton: iterative_sequence and
// use_growable_memory (a CUDA memory feature) are refused; a state with a free dim
// needs an initial state giving its first value's dims.
func (v *validator) sequenceBatching(sb *modelpb.ModelSequenceBatching, maxBatch int32) {
	const f = "sequence_batching"
	if sb.GetIterativeSequence() {
		v.add(f+".iterative_sequence", "iterative sequences (rescheduled by the model) are not implemented by kiln")
	}
	names := map[string]bool{}
	kinds := map[modelpb.ModelSequenceBatching_Control_Kind]bool{}
	for i, ci := range sb.GetControlInput() {
		field := fmt.Sprintf("%s.control_input[%d]", f, i)
		if ci.GetName() == "" {
			v.add(field+".name", "must be set")
		} else if names[ci.GetName()] {
			v.add(field+".name", "input %q carries two controls or a control and a state", ci.GetName())
		}
		names[ci.GetName()] = true
		if len(ci.GetControl()) != 1 {
			v.add(field+".control", "input %q: must give exactly one control, not %d", ci.GetName(), len(ci.GetControl()))
		}
		for k, ctl := range ci.GetControl() {
			cf := fmt.Sprintf("%s.control[%d]", field, k)
			kind := ctl.GetKind()
			if _, ok := modelpb.ModelSequenceBatching_Control_Kind_name[int32(kind)]; !ok {
				v.add(cf+".kind", "unknown kind %d", kind)
				continue
			}
			if kinds[kind] {
				v.add(cf+".kind", "%s is given twice", kind)
			}
			kinds[kind] = true
			if kind == modelpb.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID {
				if !slices.Contains(CorrIDTypes, ctl.GetDataType()) {
					v.add(cf+".data_type", "%s: a correlation ID is TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING", ctl.GetDataType())
				}
				if len(ctl.GetInt32FalseTrue())+len(ctl.GetFp32FalseTrue())+len(ctl.GetBoolFalseTrue()) > 0 {
					v.add(cf, "%s takes data_type, not false/true values", kind)
				}
				continue
			}
			if ControlType(ctl) == modelpb.DataType_TYPE_INVALID {
				v.add(cf, "%s must set exactly one of int32_false_true, fp32_false_true or bool_false_true", kind)
			}
			for _, n := range []int{len(ctl.GetInt32FalseTrue()), len(ctl.GetFp32FalseTrue()), len(ctl.GetBoolFalseTrue())} {
				if n != 0 && n != 2 {
					v.add(cf, "%s: the false/true values are two (false first), not %d", kind, n)
				}
			}
		}
	}
	outs := map[string]bool{}
	for i, st := range sb.GetState() {
		field := fmt.Sprintf("%s.state[%d]", f, i)
		switch {
		case st.GetInputName() == "":
			v.add(field+".input_name", "must be set")
		case names[st.GetInputName()]:
			v.add(field+".input_name", "input %q already carries a control or a state", st.GetInputName())
		}
		names[st.GetInputName()] = true
		switch {
		case st.GetOutputName() == "":
			v.add(field+".output_name", "must be set")
		case outs[st.GetOutputName()]:
			v.add(field+".output_name", "output %q already carries a state", st.GetOutputName())
		}
		outs[st.GetOutputName()] = true
		if !validDataType(st.GetDataType()) || st.GetDataType() == modelpb.DataType_TYPE_STRING {
			v.add(field+".data_type", "must be a numeric or bool type, not %s", st.GetDataType())
		}
		for k, d := range st.GetDims() {
			if d < 1 && d != -1 {
				v.add(fmt.Sprintf("%s.dims[%d]", field, k), "%d: a dim is positive, or -1 when the initial state gives it", d)
			}
		}
		if st.GetUseGrowableMemory() {
			v.add(field+".use_growable_memory", "growable state buffers are a CUDA memory feature; kiln does not implement them")
		}
		if len(st.GetInitialState()) > 1 {
			v.add(field+".initial_state", "give at most one initial state, not %d", len(st.GetInitialState()))
		}
		for k, is := range st.GetInitialState() {
			isf := fmt.Sprintf("%s.initial_state[%d]", field, k)
			if is.GetDataType() != st.GetDataType() {
				v.add(isf+".data_type", "%s is not the state's %s", is.GetDataType(), st.GetDataType())
			}
			if len(is.GetDims()) != len(st.GetDims()) {
				v.add(isf+".dims", "%v do not match the state's dims %v", is.GetDims(), st.GetDims())
			}
			for j, d := range is.GetDims() {
				if d < 1 || (j < len(st.GetDims()) && st.GetDims()[j] != -1 && st.GetDims()[j] != d) {
					v.add(fmt.Sprintf("%s.dims[%d]", isf, j), "%d: must be positive and match the state's dims %v", d, st.GetDims())
				}
			}
			switch src := is.GetStateData().(type) {
			case nil:
				v.add(isf, "must set zero_data or data_file")
			case *modelpb.ModelSequenceBatching_InitialState_DataFile:
				v.relativePath(isf+".data_file", src.DataFile)
			}
		}
		if len(st.GetInitialState()) == 0 && slices.Contains(st.GetDims(), -1) {
			v.add(field+".dims", "%v: a state with a free dim needs an initial_state giving its first value's dims", st.GetDims())
		}
	}
	switch s := sb.GetStrategyChoice().(type) {
	case *modelpb.ModelSequenceBatching_Direct:
		if u := s.Direct.GetMinimumSlotUtilization(); u < 0 || u > 1 {
			v.add(f+".direct.minimum_slot_utilization", "%v: must be within 0..1", u)
		}
	case *modelpb.ModelSequenceBatching_Oldest:
		if n := s.Oldest.GetMaxCandidateSequences(); n < 0 {
			v.add(f+".oldest.max_candidate_sequences", "%d: must not be negative", n)
		}
		for i, n := range s.Oldest.GetPreferredBatchSize() {
			if n <= 0 || n > max(maxBatch, 1) {
				v.add(fmt.Sprintf("%s.oldest.preferred_batch_size[%d]", f, i), "%d: must be within 1..max_batch_size", n)
			}
		}
	}
}

// checkSequenceAgainstModel checks that every control input and state input is an
// input of the model and every state output an output, of the configured types, and
// that a state's dims agree with its input's.
func checkSequenceAgainstModel(c *modelpb.ModelConfig, it *onnx.Interface) error {
	sb := c.GetSequenceBatching()
	if sb == nil {
		return nil
	}
	find := func(ps []onnx.NamedType, name string) (onnx.NamedType, bool) {
		for _, p := range ps {
			if p.Name == name {
				return p, true
			}
		}
		return onnx.NamedType{}, false
	}
	typeOf := func(kind, name string, ps []onnx.NamedType, dt modelpb.DataType) error {
		p, ok := find(ps, name)
		if !ok {
			return fmt.Errorf("sequence_batching: %s %q is not one of the model's (%v)", kind, name, names(ps))
		}
		if want, _ := DataTypeToOIP(dt); DTypeToOIP(p.Type.DType) != want {
			return fmt.Errorf("sequence_batching: %s %q is %s in the model, %s in the config", kind, name, DTypeToOIP(p.Type.DType), dt)
		}
		return nil
	}
	for _, ci := range sb.GetControlInput() {
		for _, ctl := range ci.GetControl() {
			if err := typeOf("control input", ci.GetName(), it.Inputs, ControlType(ctl)); err != nil {
				return err
			}
		}
	}
	for _, st := range sb.GetState() {
		if err := typeOf("state input", st.GetInputName(), it.Inputs, st.GetDataType()); err != nil {
			return err
		}
		p, _ := find(it.Inputs, st.GetInputName())
		if err := checkTensor("sequence_batching state input", c.MaxBatchSize, st.GetInputName(), st.GetDataType(), st.GetDims(), p); err != nil {
			return err
		}
		if err := typeOf("state output", st.GetOutputName(), it.Outputs, st.GetDataType()); err != nil {
			return err
		}
	}
	return nil
}
