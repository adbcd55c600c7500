package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/te"
)

// Epilogue is a member of a fused group computed inside the kernel of the group's anchor
// (the node being lowered): it is never written to memory on its own. In holds the
// node's inputs as placeholders, as for any node; From says, per input, whether it is
// instead the result of an earlier stage of the kernel: -1 a kernel parameter (In[i]),
// 0 the anchor's output, k+1 epilogue k's output. An epilogue that reads no stage is a
// side operand of a later one (TVM fuses those too).
type Epilogue struct {
	Node *graph.Node
	In   []Input
	From []int
}

// ApplyEpilogues composes the epilogue nodes' compute definitions onto out, in order,
// and returns the last one's tensor with the placeholders the epilogues read and where
// each comes from (Param.Node = k+1 for input Param.Input of epilogue k).
func ApplyEpilogues(reg *Registry, out *te.Tensor, epi []Epilogue) (*te.Tensor, []*te.Tensor, []Param, error) {
	stages := []*te.Tensor{out}
	for k, e := range epi {
		if len(e.From) != len(e.In) {
			return nil, nil, nil, fmt.Errorf("BUG: epilogue %v has %d sources for %d inputs", e.Node, len(e.From), len(e.In))
		}
		in := append([]Input{}, e.In...)
		for i, f := range e.From {
			if f > k {
				return nil, nil, nil, fmt.Errorf("BUG: epilogue %v reads stage %d before it is computed", e.Node, f)
			}
			if f >= 0 {
				in[i] = Input{T: stages[f]}
			}
		}
		outs, err := reg.Build(e.Node, in)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(outs) != 1 {
			return nil, nil, nil, Unsupported("epilogue %v with %d outputs", e.Node, len(outs))
		}
		stages = append(stages, outs[0])
	}
	cur := stages[len(stages)-1]
	read := map[*te.Tensor]bool{}
	for _, t := range te.Inputs(cur) {
		read[t] = true
	}
	var params []*te.Tensor
	var feeds []Param
	for k, e := range epi {
		for i, x := range e.In {
			if e.From[i] < 0 && x.T != nil && read[x.T] {
				params = append(params, x.T)
				feeds = append(feeds, Param{Node: k + 1, Input: i})
				delete(read, x.T)
			}
		}
	}
	return cur, params, feeds, nil
}
