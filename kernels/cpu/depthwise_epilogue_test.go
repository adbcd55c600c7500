package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// dwEpilogue is an activation fused after a depthwise convolution: it adds its nodes
// over d (the convolution's result) and returns the last.
type dwEpilogue struct {
	name  string
	build func(b *graph.Builder, d *graph.Value) (*graph.Value, error)
}

var dwEpilogues = []dwEpilogue{
	{"SiLU", func(b *graph.Builder, d *graph.Value) (*graph.Value, error) {
		s, err := b.Op1(graph.OpSigmoid, nil, d)
		if err != nil {
			return nil, err
		}
		return b.Op1(graph.OpMul, nil, d, s)
	}},
	{"Relu6", func(b *graph.Builder, d *graph.Value) (*graph.Value, error) {
		lo := b.Const("lo", tensor.MustFromSlice(tensor.Shape{}, []float32{0}))
		hi := b.Const("hi", tensor.MustFromSlice(tensor.Shape{}, []float32{6}))
		return b.Op1(graph.OpClip, nil, d, lo, hi)
	}},
	{"HardSwish", func(b *graph.Builder, d *graph.Value) (*graph.Value, error) {
		return b.Op1(graph.OpHardSwish, nil, d)
	}},
}

// TestDepthwiseConvWithEpiloguesMatchesReference fuses SiLU, Relu6 (Clip) and
// HardSwish after blocked depthwise (and grouped) convolutions (input and output in the blocks the
// layout policy chooses, the epilogue run per output row, with and without bias; and
// once with NCHW output, the epilogue after unpacking) and compares the kernel with the
// reference evaluator on the chain.
func TestDepthwiseConvWithEpiloguesMatchesReference(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	policy := LayoutPolicy(target.Host(), reg)
	cases := []dwCase{dwCases[0], dwCases[1], dwCases[4], dwCases[8], dwCases[10], dwCases[13]}
	for i, tc := range cases {
		for k, ep := range dwEpilogues {
			blockedOut := !(i == 0 && k == 0)
			what := fmt.Sprintf("%v + %s, blocked output %v", tc, ep.name, blockedOut)
			a, args := tc.attrs(), tc.args(uint64(1000+10*i))
			b := graph.NewBuilder("main")
			x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, int64(tc.c), int64(tc.h), int64(tc.w))...))
			vals := []*graph.Value{x}
			for j, c := range args[1:] {
				vals = append(vals, b.Const(fmt.Sprintf("c%d", j), c.T))
			}
			d, err := b.Op1(graph.OpConv, a, vals...)
			if err != nil {
				t.Fatal(err)
			}
			last, err := ep.build(b, d)
			if err != nil {
				t.Fatal(err)
			}
			m, err := b.Module(last)
			if err != nil {
				t.Fatal(err)
			}
			res, err := ref.Eval(m, map[string]ref.Value{"x": args[0].T}, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := res[0].(*tensor.Tensor)

			// store the chain as alter-layout would: x in blocks of 16, the
			// convolution's result and every epilogue's in the anchor's block
			xdata := args[0].T.Data.([]float32)
			x.Type.Block = 16
			xdata = PackNCHWc(xdata, 2, tc.c, tc.h, tc.w, 16)
			conv := d.Def
			_, out, ok := policy.Anchor(conv)
			if !ok || out == 0 {
				t.Fatalf("%s: not anchored", what)
			}
			if blockedOut {
				for _, n := range m.Main.Nodes {
					n.Outputs[0].Type.Block = out
				}
			}
			in, err := nt.Placeholders(conv)
			if err != nil {
				t.Fatal(err)
			}
			chain := m.Main.Nodes[indexOf(m.Main.Nodes, conv)+1:]
			var epi []kernels.Epilogue
			for j, n := range chain {
				ein, err := nt.Placeholders(n)
				if err != nil {
					t.Fatal(err)
				}
				from := make([]int, len(n.Inputs))
				for i, v := range n.Inputs {
					from[i] = -1
					if v == d {
						from[i] = 0
					}
					for p := 0; p < j; p++ {
						if v == chain[p].Outputs[0] {
							from[i] = p + 1
						}
					}
				}
				epi = append(epi, kernels.Epilogue{Node: n, In: ein, From: from})
			}
			impl, err := l.LowerFused(conv, in, epi, target.Host())
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !tc.takes(impl.Strategy) || !strings.HasSuffix(impl.Strategy, "+epilogue") {
				t.Fatalf("%s: strategy %s", what, impl.Strategy)
			}
			var feeds [][]float32
			for _, p := range impl.Params {
				var v *tensor.Tensor
				switch {
				case p.Node == 0 && p.Input == 0:
					feeds = append(feeds, xdata)
					continue
				case p.Node == 0:
					v = args[p.Input].T
				default:
					v = chain[p.Node-1].Inputs[p.Input].Const
				}
				if p.Prepack != nil {
					if v, err = p.Prepack(v); err != nil {
						t.Fatal(err)
					}
				}
				feeds = append(feeds, v.Data.([]float32))
			}
			got := kt.Run(t, impl.Func, nil, want.Shape.NumElements(), feeds...)
			if blockedOut {
				s := want.Shape
				got = UnpackNCHWc(got, s[0], s[1], s[2], s[3], int(out))
			}
			kt.Close(t, what, got, want)
		}
	}
}

func indexOf(nodes []*graph.Node, n *graph.Node) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}
