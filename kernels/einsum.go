package kernels

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// computeEinsum is one te reduction read off the equation at compile time: every output
// label is an output axis, every other label a reduction axis, and the body is the
// product of the inputs read at their labels. A label repeated in one term reads the
// diagonal (the same index on both axes); "..." stands for the same trailing-aligned
// run of axes in every term (numpy broadcasting: an extent 1 reads index 0); the output
// term, when omitted, is the labels used once, in alphabetical order, after the
// ellipsis. Extents of one label must agree or be 1; the equation is in every refusal.
func computeEinsum(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	eq := attrs[graph.EinsumAttrs](n).Equation
	refuse := func(format string, args ...any) error {
		return Unsupported("Einsum %q: %s", eq, fmt.Sprintf(format, args...))
	}
	terms, outTerm, err := graph.EinsumTerms(eq, len(in))
	if err != nil {
		return nil, refuse("%v", err)
	}
	dt := in[0].T.DT
	for i, x := range in {
		if !x.Present() || x.T.DT != dt || !plainNumeric(x.T.DT) {
			return nil, refuse("input %d is not of the plain numeric type %v", i, dt)
		}
	}
	// expand each term into one label per axis; the ellipsis axes get the labels
	// ellLabel(0..maxEll-1), aligned on the right
	maxEll := 0
	ellOf := make([]int, len(terms))
	for i, t := range terms {
		plain := strings.ReplaceAll(t, "...", "")
		ellOf[i] = len(in[i].T.Shape) - len(plain)
		if ellOf[i] < 0 || ellOf[i] > 0 && !strings.Contains(t, "...") || strings.Count(t, "...") > 1 {
			return nil, refuse("term %q does not fit input %d of rank %d", t, i, len(in[i].T.Shape))
		}
		maxEll = max(maxEll, ellOf[i])
	}
	expand := func(t string, nEll int) ([]rune, error) {
		var out []rune
		for j := 0; j < len(t); j++ {
			if strings.HasPrefix(t[j:], "...") {
				for k := maxEll - nEll; k < maxEll; k++ {
					out = append(out, ellLabel(k))
				}
				j += 2
				continue
			}
			r := rune(t[j])
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return nil, refuse("label %q is not a letter", r)
			}
			out = append(out, r)
		}
		return out, nil
	}
	labels := make([][]rune, len(terms))
	extent := map[rune]loopir.Expr{}
	var order []rune
	for i, t := range terms {
		if labels[i], err = expand(t, ellOf[i]); err != nil {
			return nil, err
		}
		for k, r := range labels[i] {
			e := in[i].T.Shape[k]
			old, seen := extent[r]
			switch {
			case !seen:
				extent[r] = e
				order = append(order, r)
			case isOne(e) || einsumSameExtent(old, e):
			case isOne(old):
				extent[r] = e
			default:
				return nil, refuse("label %s has extents %v and %v", labelName(r), old, e)
			}
		}
	}
	outLabels, err := expand(outTerm, maxEll)
	if err != nil {
		return nil, err
	}
	isOut := map[rune]bool{}
	outShape := make([]loopir.Expr, len(outLabels))
	want := n.Outputs[0].Type.Shape
	if len(want) != len(outLabels) {
		return nil, refuse("output of rank %d, inference gives %d", len(outLabels), len(want))
	}
	for k, r := range outLabels {
		e, ok := extent[r]
		if !ok || isOut[r] {
			return nil, refuse("output label %s is not in an input or repeated", labelName(r))
		}
		isOut[r] = true
		if w, ok := want[k].Value(); ok {
			if c, static := e.(*loopir.IntImm); static && c.V != w {
				return nil, refuse("output extent %d of label %s, inference gives %d", c.V, labelName(r), w)
			}
		}
		outShape[k] = e
	}
	var rv []loopir.IterVar
	env := map[rune]loopir.Expr{}
	for _, r := range order {
		if !isOut[r] {
			v := te.RAxis("einsum_"+labelName(r), extent[r])
			rv = append(rv, v)
			env[r] = v.Var
		}
	}
	return []*te.Tensor{te.Compute("einsum", outShape, func(i []loopir.Expr) loopir.Expr {
		for k, r := range outLabels {
			env[r] = i[k]
		}
		var prod loopir.Expr
		for j, x := range in {
			idx := make([]loopir.Expr, len(labels[j]))
			for k, r := range labels[j] {
				idx[k] = env[r]
				if isOne(x.T.Shape[k]) {
					idx[k] = i64(0)
				}
			}
			v := x.T.At(idx...)
			if prod == nil {
				prod = v
			} else {
				prod = te.Mul(prod, v)
			}
		}
		if len(rv) == 0 {
			return prod
		}
		return te.Sum(prod, rv...)
	})}, nil
}

// ellLabel is the label of the k-th ellipsis axis (not a letter, so it meets no
// equation label).
func ellLabel(k int) rune { return rune(0x100 + k) }

func labelName(r rune) string {
	if r >= 0x100 {
		return fmt.Sprintf("...[%d]", r-0x100)
	}
	return string(r)
}

// einsumSameExtent reports extents known to be equal: equal constants, or the same
// expression.
func einsumSameExtent(a, b loopir.Expr) bool {
	ca, ok1 := a.(*loopir.IntImm)
	cb, ok2 := b.(*loopir.IntImm)
	if ok1 && ok2 {
		return ca.V == cb.V
	}
	return a == b || fmt.Sprint(a) == fmt.Sprint(b)
}
