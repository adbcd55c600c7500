package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/te"
)

// Epilogue is an elementwise node applied, inside the kernel of the node before it in a
// fused chain, to that node's result: it is never written to memory on its own. Self is
// the input the previous stage feeds; In holds the node's inputs as usual (In[Self] is
// replaced by the previous stage's tensor).
type Epilogue struct {
	Node *graph.Node
	Self int
	In   []Input
}

// ApplyEpilogues composes the epilogue nodes' compute definitions onto out, in order,
// and returns the final tensor with the placeholders the epilogues read and where each
// comes from (Param.Node = k+1 for input Param.Input of epilogue k).
func ApplyEpilogues(reg *Registry, out *te.Tensor, epi []Epilogue) (*te.Tensor, []*te.Tensor, []Param, error) {
	cur := out
	for _, e := range epi {
		in := append([]Input{}, e.In...)
		if e.Self < 0 || e.Self >= len(in) {
			return nil, nil, nil, fmt.Errorf("BUG: epilogue %v fed at input %d", e.Node, e.Self)
		}
		in[e.Self] = Input{T: cur}
		outs, err := reg.Build(e.Node, in)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(outs) != 1 {
			return nil, nil, nil, Unsupported("epilogue %v with %d outputs", e.Node, len(outs))
		}
		cur = outs[0]
	}
	read := map[*te.Tensor]bool{}
	for _, t := range te.Inputs(cur) {
		read[t] = true
	}
	var params []*te.Tensor
	var feeds []Param
	for k, e := range epi {
		for i, x := range e.In {
			if i != e.Self && x.T != nil && read[x.T] {
				params = append(params, x.T)
				feeds = append(feeds, Param{Node: k + 1, Input: i})
				delete(read, x.T)
			}
		}
	}
	return cur, params, feeds, nil
}
