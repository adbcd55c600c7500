package onnx

import (
	"strconv"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/tensor"
)

// maxScan8Batch bounds the batch of an opset-8 Scan: the batch is unrolled into one
// Scan per row.
const maxScan8Batch = 256

// upScan rewrites an opset-8 Scan (inputs: sequence_lens, states, scan inputs, all with a
// leading batch axis; scan inputs scanned along axis 1) into the opset-9 form: for each
// row b of the batch, Gather row b of every state and scan input, run an opset-9 Scan
// on them (directions become scan_input_directions) with its own copy of the body, and
// stack the rows of each output (Unsqueeze, Concat along axis 0). The batch must be
// static, and sequence_lens absent (every row scans the whole sequence); a Scan that
// needs either is refused with the reason.
func upScan(c *nodeConv) (bool, error) {
	if c.opset >= 9 {
		return false, nil
	}
	if len(c.inputs) > 0 && c.inputs[0] != nil {
		return false, c.unsupported("Scan before opset 9 with sequence_lens (rows of different lengths)")
	}
	a, ok := c.attrs["num_scan_inputs"]
	if !ok || a.GetType() != onnxpb.AttributeProto_INT {
		return false, c.errorf("%w: required attribute %q is missing", ErrInvalid, "num_scan_inputs")
	}
	if d, ok := c.takeAttr("directions"); ok {
		name := "scan_input_directions"
		d.Name = &name
		c.attrs[name] = d
	}
	data := c.inputs[min(1, len(c.inputs)):]
	m := int(a.GetI())
	if m < 1 || m > len(data) {
		return false, c.errorf("%w: num_scan_inputs %d with %d inputs", ErrInvalid, m, len(data))
	}
	batch := int64(-1)
	for _, v := range data {
		if v == nil || v.Type.Kind != graph.KindTensor || v.Type.UnknownRank || len(v.Type.Shape) == 0 {
			return false, c.errorf("%w: an input of a batched Scan is not a tensor with a batch axis", ErrInvalid)
		}
		b, ok := v.Type.Shape[0].Value()
		if !ok {
			return false, c.unsupported("Scan before opset 9 with a batch of run-time size (%v)", v.Type.Shape[0])
		}
		if batch >= 0 && b != batch {
			return false, c.errorf("%w: batch extents %d and %d differ", ErrInvalid, batch, b)
		}
		batch = b
	}
	if batch < 1 || batch > maxScan8Batch {
		return false, c.unsupported("Scan before opset 9 with a batch of %d (kiln unrolls batches of 1 to %d)", batch, maxScan8Batch)
	}
	scanAttrs := c.attrs
	rows := make([][]*graph.Value, len(c.outNames))
	for b := int64(0); b < batch; b++ {
		idx := c.constInput(tensor.Scalar(b))
		ins := make([]*graph.Value, len(data))
		for j, v := range data {
			g, err := c.emitWith(graph.OpGather, map[string]int64{"axis": 0}, []*graph.Value{v, idx}, c.fresh("row"))
			if err != nil {
				return false, err
			}
			ins[j] = g
		}
		names := make([]string, len(c.outNames))
		for k := range names {
			names[k] = c.fresh("scan")
		}
		c.attrs = scanAttrs
		if err := c.emit(graph.OpScan, ins, names); err != nil {
			return false, err
		}
		axes := c.constInput(tensor.MustFromSlice(tensor.Shape{1}, []int64{0}))
		for k, name := range names {
			out, _ := c.sc.lookup(name)
			target := c.fresh("stacked")
			if batch == 1 {
				target = c.outNames[k]
			}
			u, err := c.emitWith(graph.OpUnsqueeze, nil, []*graph.Value{out, axes}, target)
			if err != nil {
				return false, err
			}
			rows[k] = append(rows[k], u)
		}
	}
	c.attrs = map[string]*onnxpb.AttributeProto{}
	if batch > 1 {
		for k, name := range c.outNames {
			if _, err := c.emitWith(graph.OpConcat, map[string]int64{"axis": 0}, rows[k], name); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// fresh is a new value name for a helper node of this node.
func (c *nodeConv) fresh(what string) string {
	c.im.unique++
	return c.np.GetName() + "_" + what + strconv.Itoa(c.im.unique)
}
