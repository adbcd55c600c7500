package passes

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// StubBranches replaces each branch of an If that does not type for the bound shapes by
// a branch that fails when it runs. A model that branches on a run-time value (silero
// VAD's sample rate) holds front ends sized for other inputs than the bound ones: there
// the shape arithmetic of the untaken branch does not type (an LSTM given a rank-5
// input), its values would keep unknown ranks and no kernel could be built for them,
// though the branch never runs on these shapes. The stub is one kiln.Fail node per
// result, typed as the other branch's result, whose message names the If, the branch
// and the inference error; so the If's outputs take the other branch's static types and
// the run fails with that message only if the branch is taken (as ONNX Runtime fails
// only then).
//
// Every If and the nodes of its branches are inferred again in order, as
// fold-constants' refine does (a new type is taken only when it has fewer symbolic
// extents), and once a branch has been stubbed so is every node after it, so the static types of its If reach them,
// enclosing Funcs included. A Func does
// not type when one of its nodes' inference fails; an If whose two branches do not type
// does not type either, and makes its own Func fail in turn, so the stubbed branch is
// the outermost one that cannot run. A branch whose If has a constant condition and is
// not taken is stubbed when it does not type (the compiler lowers only the taken one).
// Errors outside any If branch leave the module as it is (the compiler reports the
// nodes it cannot build), as do those inside Loop and Scan bodies.
func StubBranches(ctx *Context, m *graph.Module) error {
	s := &stubber{ctx: ctx, ic: &graph.InferCtx{M: m}, names: moduleNames(m)}
	s.types(m.Main)
	return s.stop
}

// stubber is one StubBranches run.
type stubber struct {
	ctx   *Context
	ic    *graph.InferCtx
	stop  error // why the run stopped early (Context.Ctx)
	names *freshNames
	// branches counts the If branches the walk is in; outside them a node is inferred
	// again only once a branch has been stubbed (stubbed), since only then can its type
	// change: a module without stubs costs one walk, not an inference per node
	branches int
	stubbed  bool
}

// types infers f's nodes again, stubbing the branches of its Ifs that do not type, and
// returns the first inference error of a node of f (nil: f types).
func (s *stubber) types(f *graph.Func) error {
	var first error
	for _, n := range f.Nodes {
		if s.stop == nil {
			if err := s.ctx.stopped(); err != nil {
				s.stop = fmt.Errorf("at %v: %w", n, err)
			}
		}
		if s.stop != nil {
			return nil
		}
		a, isIf := n.Attrs.(*graph.IfAttrs)
		if isIf {
			if err := s.ifBranches(n, a); err != nil {
				if first == nil {
					first = err
				}
				continue
			}
		} else {
			for _, sub := range n.Subgraphs() {
				s.types(sub)
			}
		}
		if !isIf && s.branches == 0 && !s.stubbed {
			continue
		}
		types, err := graph.InferNode(s.ic, n)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		for i, t := range types {
			old := n.Outputs[i].Type
			if t.Kind == old.Kind && t.DType == old.DType && symbolic(t) < symbolic(old) {
				n.Outputs[i].Type = t
			}
		}
	}
	return first
}

// ifBranches types both branches of n and stubs the one that does not type; it returns
// an error when n cannot run at all.
func (s *stubber) ifBranches(n *graph.Node, a *graph.IfAttrs) error {
	s.branches++
	thenErr := s.types(a.ThenBranch)
	elseErr := s.types(a.ElseBranch)
	s.branches--
	if c := n.Input(0); c != nil && c.Const != nil && c.Const.Len() == 1 {
		taken := c.Const.Int64s()[0] != 0
		switch {
		case taken && thenErr != nil:
			return thenErr
		case !taken && elseErr != nil:
			return elseErr
		case taken && elseErr != nil:
			a.ElseBranch = s.stub(n, "else_branch", a.ElseBranch, a.ThenBranch, elseErr)
		case !taken && thenErr != nil:
			a.ThenBranch = s.stub(n, "then_branch", a.ThenBranch, a.ElseBranch, thenErr)
		}
		return nil
	}
	switch {
	case thenErr != nil && elseErr != nil:
		return fmt.Errorf("neither branch of %v can run on these input shapes: then_branch: %w; else_branch: %v", n, thenErr, elseErr)
	case thenErr != nil:
		a.ThenBranch = s.stub(n, "then_branch", a.ThenBranch, a.ElseBranch, thenErr)
	case elseErr != nil:
		a.ElseBranch = s.stub(n, "else_branch", a.ElseBranch, a.ThenBranch, elseErr)
	}
	return nil
}

// stub returns the branch that stands for br: one kiln.Fail per result, typed as
// other's result.
func (s *stubber) stub(n *graph.Node, name string, br, other *graph.Func, why error) *graph.Func {
	s.stubbed = true
	msg := fmt.Sprintf("branch %s of %v cannot run on these input shapes: %v", name, n, why)
	f := &graph.Func{Name: br.Name, Parent: br.Parent}
	for i, r := range other.Results {
		t := r.Type
		t.Known = nil
		out := &graph.Value{Name: s.names.fresh(fmt.Sprintf("%s_fail%d", br.Name, i)), Type: t}
		fn := &graph.Node{Op: graph.OpFail, Attrs: &graph.FailAttrs{Message: msg, Type: &t}, Outputs: []*graph.Value{out}}
		out.Def = fn
		f.Nodes = append(f.Nodes, fn)
		f.Results = append(f.Results, out)
	}
	return f
}
