package ref

// Control flow (If, Loop, Scan, SequenceMap), sequences and optionals.

import (
	"fmt"
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func controlKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpIf:                 ctlIf,
		graph.OpLoop:               ctlLoop,
		graph.OpScan:               ctlScan,
		graph.OpSequenceMap:        ctlSequenceMap,
		graph.OpSequenceConstruct:  ctlSequenceConstruct,
		graph.OpSequenceEmpty:      ctlSequenceEmpty,
		graph.OpSequenceAt:         ctlSequenceAt,
		graph.OpSequenceInsert:     ctlSequenceInsert,
		graph.OpSequenceErase:      ctlSequenceErase,
		graph.OpSequenceLength:     ctlSequenceLength,
		graph.OpSplitToSequence:    ctlSplitToSequence,
		graph.OpConcatFromSequence: ctlConcatFromSequence,
		graph.OpOptional:           ctlOptional,
		graph.OpOptionalGetElement: ctlOptionalGet,
		graph.OpOptionalHasElement: ctlOptionalHas,
	}
}

func ctlTensor(v Value, what string) (*tensor.Tensor, error) {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		return nil, Badf("%s is %s, want a tensor", what, Describe(v))
	}
	return t, nil
}

// ctlBool reads a one-element boolean (or numeric) tensor.
func ctlBool(v Value, what string) (bool, error) {
	t, err := ctlTensor(v, what)
	if err != nil {
		return false, err
	}
	if t.Len() != 1 {
		return false, Badf("%s has %d elements, want 1", what, t.Len())
	}
	return t.Float64s()[0] != 0, nil
}

func ctlInt(v Value, what string) (int64, error) {
	t, err := ctlTensor(v, what)
	if err != nil {
		return 0, err
	}
	if t.Len() != 1 || !t.DType.IsInt() {
		return 0, Badf("%s is %v%v, want one integer", what, t.DType, t.Shape)
	}
	return t.Int64s()[0], nil
}

func ctlIf(ec *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	c, err := ctlBool(in[0], "condition")
	if err != nil {
		return nil, err
	}
	a := attrs[graph.IfAttrs](n)
	branch := a.ElseBranch
	if c {
		branch = a.ThenBranch
	}
	return ec.Run(branch, nil)
}

func ctlLoop(ec *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	body := attrs[graph.LoopAttrs](n).Body
	maxTrip := int64(-1)
	if in[0] != nil {
		m, err := ctlInt(in[0], "trip count M")
		if err != nil {
			return nil, err
		}
		maxTrip = m
	}
	cond := true
	if in[1] != nil {
		c, err := ctlBool(in[1], "condition")
		if err != nil {
			return nil, err
		}
		cond = c
	}
	carried := append([]Value(nil), in[2:]...)
	nScan := len(n.Outputs) - len(carried)
	scans := make([][]Value, max(nScan, 0))
	for i := int64(0); cond && (maxTrip < 0 || i < maxTrip); i++ {
		if maxTrip < 0 && i >= ec.opts.MaxLoopIterations {
			return nil, Badf("loop ran %d iterations without its condition turning false (limit)", i)
		}
		args := append([]Value{tensor.Scalar(i), tensor.Scalar(cond)}, carried...)
		res, err := ec.Run(body, args)
		if err != nil {
			return nil, fmt.Errorf("loop iteration %d: %w", i, err)
		}
		if cond, err = ctlBool(res[0], "body condition output"); err != nil {
			return nil, err
		}
		copy(carried, res[1:1+len(carried)])
		for k := range scans {
			scans[k] = append(scans[k], res[1+len(carried)+k])
		}
	}
	out := append([]Value(nil), carried...)
	for k, items := range scans {
		r := body.Results[1+len(carried)+k].Type
		st, err := ctlStack(items, 0, r)
		if err != nil {
			return nil, fmt.Errorf("loop scan output %d: %w", k, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// ctlStack stacks tensors along a new axis; with no items the result has extent 0 there
// and the other extents from the static element type when known (else 0).
func ctlStack(items []Value, axis int, elem graph.Type) (*tensor.Tensor, error) {
	if len(items) == 0 {
		shape := tensor.Shape{0}
		for _, d := range elem.Shape {
			v, _ := d.Value()
			shape = append(shape, int(v))
		}
		dt := elem.DType
		if !dt.Valid() {
			dt = tensor.Float32
		}
		return tensor.New(dt, shape), nil
	}
	ts := make([]*tensor.Tensor, len(items))
	for i, it := range items {
		t, err := ctlTensor(it, "scan output")
		if err != nil {
			return nil, err
		}
		if i > 0 && (t.DType != ts[0].DType || !t.Shape.Equal(ts[0].Shape)) {
			return nil, Badf("iteration %d produced %v%v, earlier ones %v%v", i, t.DType, t.Shape, ts[0].DType, ts[0].Shape)
		}
		ts[i] = t
	}
	return ctlConcat(ts, axis, true)
}

// ctlConcat joins tensors along axis (newAxis: each gets a unit axis inserted first).
func ctlConcat(ts []*tensor.Tensor, axis int, newAxis bool) (*tensor.Tensor, error) {
	base := ts[0].Shape
	if newAxis {
		base = append(append(append(tensor.Shape{}, base[:axis]...), 1), base[axis:]...)
	}
	if axis < 0 || axis >= len(base) {
		return nil, Badf("axis %d out of range for %v", axis, base)
	}
	outer := base[:axis].NumElements()
	total := 0
	for _, t := range ts {
		s := t.Shape
		if newAxis {
			s = append(append(append(tensor.Shape{}, s[:axis]...), 1), s[axis:]...)
		}
		if len(s) != len(base) || t.DType != ts[0].DType {
			return nil, Badf("cannot concatenate %v%v with %v%v", ts[0].DType, ts[0].Shape, t.DType, t.Shape)
		}
		for i := range s {
			if i != axis && s[i] != base[i] {
				return nil, Badf("cannot concatenate %v with %v on axis %d", ts[0].Shape, t.Shape, axis)
			}
		}
		total += s[axis]
	}
	shape := base.Clone()
	shape[axis] = total
	out := tensor.New(ts[0].DType, shape)
	dst := reflect.ValueOf(out.Data)
	off := 0
	for o := 0; o < outer; o++ {
		for _, t := range ts {
			src := reflect.ValueOf(t.Data)
			chunk := t.Len() / outer
			reflect.Copy(dst.Slice(off, off+chunk), src.Slice(o*chunk, (o+1)*chunk))
			off += chunk
		}
	}
	return out, nil
}

// ctlSliceAxis returns t[..., k, ...] along axis, dropping that axis.
func ctlSliceAxis(t *tensor.Tensor, axis, k int) *tensor.Tensor {
	outer := t.Shape[:axis].NumElements()
	n := t.Shape[axis]
	inner := t.Shape[axis+1:].NumElements()
	shape := append(append(tensor.Shape{}, t.Shape[:axis]...), t.Shape[axis+1:]...)
	out := tensor.New(t.DType, shape)
	src, dst := reflect.ValueOf(t.Data), reflect.ValueOf(out.Data)
	for o := 0; o < outer; o++ {
		reflect.Copy(dst.Slice(o*inner, (o+1)*inner), src.Slice((o*n+k)*inner, (o*n+k+1)*inner))
	}
	return out
}

func ctlScan(ec *Ctx, n *graph.Node, in []Value) ([]Value, error) {
	a := attrs[graph.ScanAttrs](n)
	m := int(a.NumScanInputs)
	nState := len(in) - m
	states := append([]Value(nil), in[:nState]...)
	scanIn := make([]*tensor.Tensor, m)
	axes := make([]int, m)
	seqLen := -1
	for j := 0; j < m; j++ {
		t, err := ctlTensor(in[nState+j], fmt.Sprintf("scan input %d", j))
		if err != nil {
			return nil, err
		}
		ax := int64(0)
		if j < len(a.ScanInputAxes) {
			ax = a.ScanInputAxes[j]
		}
		axis, err := tensor.NormAxis(ax, len(t.Shape))
		if err != nil {
			return nil, Badf("scan input %d: %v", j, err)
		}
		if seqLen >= 0 && t.Shape[axis] != seqLen {
			return nil, Badf("scan inputs have lengths %d and %d", seqLen, t.Shape[axis])
		}
		seqLen, scanIn[j], axes[j] = t.Shape[axis], t, axis
	}
	if seqLen < 0 {
		seqLen = 0
	}
	nOut := len(n.Outputs) - nState
	outs := make([][]Value, max(nOut, 0))
	for it := 0; it < seqLen; it++ {
		args := append([]Value(nil), states...)
		for j, t := range scanIn {
			k := it
			if j < len(a.ScanInputDirections) && a.ScanInputDirections[j] == 1 {
				k = seqLen - 1 - it
			}
			args = append(args, ctlSliceAxis(t, axes[j], k))
		}
		res, err := ec.Run(a.Body, args)
		if err != nil {
			return nil, fmt.Errorf("scan iteration %d: %w", it, err)
		}
		copy(states, res[:nState])
		for k := range outs {
			outs[k] = append(outs[k], res[nState+k])
		}
	}
	result := append([]Value(nil), states...)
	for k, items := range outs {
		if k < len(a.ScanOutputDirections) && a.ScanOutputDirections[k] == 1 {
			for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
				items[i], items[j] = items[j], items[i]
			}
		}
		r := a.Body.Results[nState+k].Type
		axis := 0
		if k < len(a.ScanOutputAxes) {
			ax, err := tensor.NormAxis(a.ScanOutputAxes[k], len(r.Shape)+1)
			if err != nil {
				return nil, Badf("scan output %d: %v", k, err)
			}
			axis = ax
		}
		st, err := ctlStack(items, axis, r)
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %w", k, err)
		}
		result = append(result, st)
	}
	return result, nil
}
