package cpu

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestConvIntegerU8S8MatchesRef: uint8 data with weights that fit int8 after their zero
// point (symmetric int8 weights; uint8 ones with a zero point near their middle) take
// the 8-bit micro-kernel on a host with AVX-512 VNNI (the kernel calls it) and the int16
// pairs elsewhere, and equal the reference evaluator: a data zero point at run time,
// constant or absent (the borders hold it; its term is added per output channel),
// padding, strides, dilation, 1×1, output channels a tile divides and ones it pads;
// QLinearConv too. Weights at int8's ends.
func TestConvIntegerU8S8MatchesRef(t *testing.T) {
	l := Strategies(kernels.Default())
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	attrs := func(pads, strides, dil []int64) *graph.ConvAttrs {
		return &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: pads, Strides: strides, Dilations: dil}
	}
	ends := func(v *tensor.Tensor, lo, hi float64) *tensor.Tensor {
		d := v.Float64s()
		for i := 0; i < len(d); i += 5 {
			d[i] = map[bool]float64{true: lo, false: hi}[i%2 == 0]
		}
		return tensor.FromFloat64s(v.DType, v.Shape, d)
	}
	x := ends(quantTensor(60, tensor.Uint8, 0, 255, 1, 16, 9, 14), 0, 255)
	w64 := ends(quantTensor(61, tensor.Int8, -128, 127, 64, 16, 3, 3), -128, 127)
	w20 := ends(quantTensor(62, tensor.Int8, -128, 127, 20, 16, 3, 3), -128, 127)
	w1 := quantTensor(63, tensor.Int8, -128, 127, 32, 16, 1, 1)
	uw := quantTensor(64, tensor.Uint8, 100, 160, 24, 16, 3, 3) // minus 130: within int8
	vnni := target.Host().Has("avx512vnni") && target.Host().Has("avx512bw")
	cases := []struct {
		name string
		op   graph.Op
		a    *graph.ConvAttrs
		args []nt.Arg
	}{
		{"3x3, zero point at run time", graph.OpConvInteger, attrs([]int64{1, 1, 1, 1}, nil, nil), []nt.Arg{nt.In(x), nt.C(w64), nt.In(u8(131)), nt.C(i8(0))}},
		{"padded channels, constant zero point", graph.OpConvInteger, attrs([]int64{1, 2, 0, 1}, []int64{2, 1}, nil), []nt.Arg{nt.In(x), nt.C(w20), nt.C(u8(7)), nt.C(i8(0))}},
		{"dilated, no zero points", graph.OpConvInteger, attrs([]int64{2, 2, 2, 2}, nil, []int64{2, 2}), []nt.Arg{nt.In(x), nt.C(w64)}},
		{"1x1", graph.OpConvInteger, attrs(nil, nil, nil), []nt.Arg{nt.In(x), nt.C(w1), nt.In(u8(255))}},
		{"uint8 weights near their zero point", graph.OpConvInteger, attrs([]int64{1, 1, 1, 1}, nil, nil), []nt.Arg{nt.In(x), nt.C(uw), nt.In(u8(17)), nt.C(u8(130))}},
		{"QLinearConv", graph.OpQLinearConv, attrs([]int64{1, 1, 1, 1}, nil, nil), []nt.Arg{nt.In(x), nt.In(f(0.02)), nt.In(u8(128)), nt.C(w64),
			nt.C(quantTensor(65, tensor.Float32, 0.001, 0.02, 64)), nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{64}, make([]float64, 64))),
			nt.In(f(0.3)), nt.In(u8(120)), nt.C(quantTensor(66, tensor.Int32, -20000, 20000, 64))}},
	}
	for _, c := range cases {
		if got := nt.CheckNode(t, l, c.op, c.a, 1, c.args...); got != "conv-integer-blocked" {
			t.Errorf("%s: strategy %s, want conv-integer-blocked", c.name, got)
		}
		m, _ := nt.Build(t, c.op, c.a, 1, c.args...)
		n := m.Main.Nodes[len(m.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.Lower(n, in, target.Host())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if quads := strings.Contains(loopir.Print(impl.Func), "kiln_gemm_u8s8_"); quads != vnni {
			t.Errorf("%s: the 8-bit micro-kernel called %v, the host has AVX-512 VNNI %v", c.name, quads, vnni)
		}
	}
	if !vnni {
		t.Log("this host has no AVX-512 VNNI: the int16 pairs ran every case")
	}
}
