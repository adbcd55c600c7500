package kernels

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// compileRun lowers outputs[0] from inputs, compiles it, runs it with the given dims and
// input data, and returns the output floats.
func compileRun(t *testing.T, inputs []*te.Tensor, out *te.Tensor, dims []int64, outLen int, data ...[]float32) []float32 {
	t.Helper()
	f, err := te.Lower(out.Name, inputs, []*te.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	if err := loopir.Verify(f); err != nil {
		t.Fatal(err)
	}
	g, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(g)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.Open(cpu.Options{})
	if errors.Is(err, devices.ErrUnavailable) {
		t.Skipf("no C compiler: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	var bufs []devices.Buffer
	for _, d := range append(data, make([]float32, outLen)) {
		b, err := dev.Alloc(int64(4 * len(d)))
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, 4*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		if err := dev.CopyIn(b, raw); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, dims); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4*outLen)
	if err := dev.CopyOut(raw, bufs[len(bufs)-1]); err != nil {
		t.Fatal(err)
	}
	res := make([]float32, outLen)
	for i := range res {
		res[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return res
}

// refRun evaluates one graph op on the reference evaluator; consts are extra constant
// inputs appended after the tensors.
func refRun(t *testing.T, op graph.Op, attrs any, ins []*tensor.Tensor, consts ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	b := graph.NewBuilder("main")
	inputs := map[string]ref.Value{}
	var vals []*graph.Value
	for i, in := range ins {
		name := string(rune('a' + i))
		shape := make([]int64, len(in.Shape))
		for k, d := range in.Shape {
			shape[k] = int64(d)
		}
		vals = append(vals, b.Param(name, graph.TensorType(in.DType, graph.StaticShape(shape...)...)))
		inputs[name] = in
	}
	for _, c := range consts {
		vals = append(vals, b.Const("", c))
	}
	out, err := b.Op1(op, attrs, vals...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func check(t *testing.T, what string, got []float32, want *tensor.Tensor) {
	t.Helper()
	w := want.Float64s()
	if len(got) != len(w) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(w))
	}
	for i := range w {
		if d := math.Abs(float64(got[i]) - w[i]); d > 1e-4+1e-3*math.Abs(w[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], w[i])
		}
	}
}

func rnd(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

func ts(shape tensor.Shape, v []float32) *tensor.Tensor { return tensor.MustFromSlice(shape, v) }

func TestConv2D(t *testing.T) {
	cases := []struct {
		name                    string
		c, h, w, m, k, s, p, dl int64
		groups                  int64
		symbolicBatch           bool
	}{
		{"3x3 pad1", 4, 9, 9, 8, 3, 1, 1, 1, 1, true},
		{"stride2 dilation2", 3, 11, 10, 5, 3, 2, 2, 2, 1, false},
		{"depthwise", 6, 8, 8, 6, 3, 1, 1, 1, 6, true},
		{"grouped 1x1", 8, 5, 5, 4, 1, 1, 0, 1, 2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const n = 2
			var batch loopir.Expr = loopir.Int(n)
			var dims []int64
			if c.symbolicBatch {
				batch = te.Dim("n")
				dims = []int64{n}
			}
			x := te.Placeholder("x", tensor.Float32, batch, loopir.Int(c.c), loopir.Int(c.h), loopir.Int(c.w))
			w := te.Placeholder("w", tensor.Float32, loopir.Int(c.m), loopir.Int(c.c/c.groups), loopir.Int(c.k), loopir.Int(c.k))
			out, err := Conv2D(x, w, Conv2DAttrs{Strides: [2]int64{c.s, c.s}, Pads: [2]int64{c.p, c.p}, Dilations: [2]int64{c.dl, c.dl}, Groups: c.groups})
			if err != nil {
				t.Fatal(err)
			}
			xv, wv := rnd(1, int(n*c.c*c.h*c.w)), rnd(2, int(c.m*(c.c/c.groups)*c.k*c.k))
			oh := (c.h+2*c.p-c.dl*(c.k-1)-1)/c.s + 1
			ow := (c.w+2*c.p-c.dl*(c.k-1)-1)/c.s + 1
			got := compileRun(t, []*te.Tensor{x, w}, out, dims, int(n*c.m*oh*ow), xv, wv)
			want := refRun(t, graph.OpConv, &graph.ConvAttrs{AutoPad: "NOTSET", Group: c.groups,
				Strides: []int64{c.s, c.s}, Pads: []int64{c.p, c.p, c.p, c.p}, Dilations: []int64{c.dl, c.dl}},
				[]*tensor.Tensor{ts(tensor.Shape{n, int(c.c), int(c.h), int(c.w)}, xv), ts(tensor.Shape{int(c.m), int(c.c / c.groups), int(c.k), int(c.k)}, wv)})
			check(t, c.name, got, want)
		})
	}
}

func TestPool2D(t *testing.T) {
	for _, isMax := range []bool{true, false} {
		x := te.Placeholder("x", tensor.Float32, te.Dim("n"), loopir.Int(3), loopir.Int(9), loopir.Int(9))
		out, err := Pool2D(x, [2]int64{3, 3}, [2]int64{2, 2}, [2]int64{1, 1}, isMax)
		if err != nil {
			t.Fatal(err)
		}
		xv := rnd(3, 2*3*9*9)
		got := compileRun(t, []*te.Tensor{x}, out, []int64{2}, 2*3*5*5, xv)
		op := graph.OpAveragePool
		if isMax {
			op = graph.OpMaxPool
		}
		want := refRun(t, op, &graph.PoolAttrs{AutoPad: "NOTSET", KernelShape: []int64{3, 3}, Strides: []int64{2, 2}, Pads: []int64{1, 1, 1, 1}, P: 2},
			[]*tensor.Tensor{ts(tensor.Shape{2, 3, 9, 9}, xv)})
		check(t, op.String(), got, want)
	}
}

func TestSoftmaxLayerNormReduce(t *testing.T) {
	rows := te.Dim("rows")
	const r, n = 5, 33
	x := te.Placeholder("x", tensor.Float32, rows, loopir.Int(n))
	xv := rnd(4, r*n)
	xt := ts(tensor.Shape{r, n}, xv)

	got := compileRun(t, []*te.Tensor{x}, Softmax(x), []int64{r}, r*n, xv)
	check(t, "softmax", got, refRun(t, graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: -1}, []*tensor.Tensor{xt}))

	gamma := te.Placeholder("gamma", tensor.Float32, loopir.Int(n))
	beta := te.Placeholder("beta", tensor.Float32, loopir.Int(n))
	gv, bv := rnd(5, n), rnd(6, n)
	got = compileRun(t, []*te.Tensor{x, gamma, beta}, LayerNorm(x, gamma, beta, 1e-5), []int64{r}, r*n, xv, gv, bv)
	check(t, "layernorm", got, refRun(t, graph.OpLayerNormalization, &graph.LayerNormAttrs{Axis: -1, Epsilon: 1e-5, StashType: 1},
		[]*tensor.Tensor{xt, ts(tensor.Shape{n}, gv), ts(tensor.Shape{n}, bv)}))

	axes := tensor.MustFromSlice(tensor.Shape{1}, []int64{-1})
	got = compileRun(t, []*te.Tensor{x}, ReduceLast(x, false), []int64{r}, r, xv)
	check(t, "reduce sum", got, refRun(t, graph.OpReduceSum, &graph.ReduceAttrs{KeepDims: 0}, []*tensor.Tensor{xt}, axes))
	got = compileRun(t, []*te.Tensor{x}, ReduceLast(x, true), []int64{r}, r, xv)
	check(t, "reduce max", got, refRun(t, graph.OpReduceMax, &graph.ReduceAttrs{KeepDims: 0}, []*tensor.Tensor{xt}, axes))

	// static shapes too
	xs := te.Placeholder("x", tensor.Float32, loopir.Int(r), loopir.Int(n))
	got = compileRun(t, []*te.Tensor{xs}, Softmax(xs), nil, r*n, xv)
	check(t, "softmax static", got, refRun(t, graph.OpSoftmax, &graph.SoftmaxAttrs{Axis: -1}, []*tensor.Tensor{xt}))
}

func TestMatMulDefinition(t *testing.T) {
	m := te.Dim("m")
	a := te.Placeholder("a", tensor.Float32, m, loopir.Int(24))
	b := te.Placeholder("b", tensor.Float32, loopir.Int(24), loopir.Int(10))
	av, bv := rnd(7, 3*24), rnd(8, 24*10)
	got := compileRun(t, []*te.Tensor{a, b}, MatMul(a, b), []int64{3}, 30, av, bv)
	check(t, "matmul", got, refRun(t, graph.OpMatMul, nil, []*tensor.Tensor{ts(tensor.Shape{3, 24}, av), ts(tensor.Shape{24, 10}, bv)}))
}
