package gpu_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// ty is a tensor type over dims as graph.ParseDim reads them ("3", "n").
func ty(t testing.TB, dt tensor.DType, dims ...string) graph.Type {
	t.Helper()
	shape := make([]graph.Dim, len(dims))
	for i, s := range dims {
		d, err := graph.ParseDim(s)
		if err != nil {
			t.Fatal(err)
		}
		shape[i] = d
	}
	return graph.TensorType(dt, shape...)
}

// stage is an elementwise node fused after the previous one: op over the previous
// result at input at and run-time inputs of types args elsewhere (args[at] is ignored).
type stage struct {
	op   graph.Op
	at   int
	args []graph.Type
}

// gcase is a node (and its fused epilogues) over run-time inputs of the given types,
// checked at every binding of its symbols. consts, when set, makes the node's inputs
// at those positions constants (ReduceSum's axes); their args entry is ignored.
type gcase struct {
	name   string
	op     graph.Op
	attrs  any
	args   []graph.Type
	consts map[int]*tensor.Tensor
	stages []stage
	binds  []map[string]int64
	// first, when set, are strategies tried before the table's (a tensor-core rule)
	first func(reg *kernels.Registry) []kernels.Strategy
}

// lowered is a case lowered for a GPU: the graph, its kernel and launch.
type lowered struct {
	m      *graph.Module
	nodes  []*graph.Node
	params map[*graph.Value]string
	impl   *kernels.Impl
	f      *loopir.PrimFunc
	launch loopir.Launch
}

// testGPU is the target the tests lower for (an sm_80 part's limits).
func testGPU(t testing.TB) target.Target {
	t.Helper()
	tg, err := target.GPU(target.CUDA, "sm_80", target.GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 108})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// lower builds the case's graph and lowers it with the GPU strategies, through the
// GPU pipeline and the launch derivation, verified against tg.
func lower(t testing.TB, c gcase, tg target.Target) *lowered {
	t.Helper()
	b := graph.NewBuilder("main")
	l := &lowered{params: map[*graph.Value]string{}}
	mk := func(prefix string, types []graph.Type, skip int) []*graph.Value {
		vals := make([]*graph.Value, len(types))
		for i, tp := range types {
			if k, ok := c.consts[i]; ok && prefix == "x" {
				vals[i] = b.Const(fmt.Sprintf("c%d", i), k)
			} else if i != skip {
				name := fmt.Sprintf("%s%d", prefix, i)
				vals[i] = b.Param(name, tp)
				l.params[vals[i]] = name
			}
		}
		return vals
	}
	outs, err := b.Node(c.op, c.attrs, 1, mk("x", c.args, -1)...)
	if err != nil {
		t.Fatal(err)
	}
	l.nodes = []*graph.Node{outs[0].Def}
	for k, st := range c.stages {
		v := mk(fmt.Sprintf("s%d_", k), st.args, st.at)
		v[st.at] = outs[0]
		if outs, err = b.Node(st.op, nil, 1, v...); err != nil {
			t.Fatal(err)
		}
		l.nodes = append(l.nodes, outs[0].Def)
	}
	if l.m, err = b.Module(outs[0]); err != nil {
		t.Fatal(err)
	}
	syms := kernels.Syms{}
	placeholders := func(vals []*graph.Value) []kernels.Input {
		in := make([]kernels.Input, len(vals))
		for i, v := range vals {
			in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...), Const: v.Const}
		}
		return in
	}
	reg := kernels.Default()
	st := gpu.Strategies(reg)
	if c.first != nil {
		st = st.First(c.first(reg)...)
	}
	in := placeholders(l.nodes[0].Inputs)
	if len(c.stages) == 0 {
		l.impl, err = st.Lower(l.nodes[0], in, tg)
	} else {
		var epi []kernels.Epilogue
		for k, s := range c.stages {
			ein := placeholders(l.nodes[k+1].Inputs)
			from := make([]int, len(ein))
			for i := range from {
				from[i] = -1
			}
			from[s.at] = k
			epi = append(epi, kernels.Epilogue{Node: l.nodes[k+1], In: ein, From: from})
		}
		l.impl, err = st.LowerFused(l.nodes[0], in, epi, tg)
	}
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if err := loopir.Verify(l.impl.Func); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	low, err := passes.GPUPipeline().Run(l.impl.Func)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if l.f, l.launch, err = passes.DeriveLaunch(low); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if err := passes.VerifyLaunch(l.f, l.launch, tg.GPU); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return l
}

// nvrtcOrSkip finds NVRTC, or skips the test (fails it under KILN_REQUIRE_DATA=1).
func nvrtcOrSkip(t *testing.T) *cuda.NVRTC {
	t.Helper()
	nv, err := cuda.FindNVRTC()
	if errors.Is(err, devices.ErrUnavailable) {
		const how = "install NVRTC (Debian: libnvrtc11.2; NVIDIA: the CUDA toolkit or the nvidia-cuda-nvrtc wheel), or set $KILN_NVRTC"
		if testdata.Require() {
			t.Fatalf("NVRTC is absent and KILN_REQUIRE_DATA=1 (%v): %s", err, how)
		}
		t.Skipf("NVRTC is absent (%v; %s); skipping", err, how)
	}
	if err != nil {
		t.Fatal(err)
	}
	return nv
}

// deviceOrSkip opens CUDA GPU 0, or skips the test when there is no driver or device
// (fails it under KILN_REQUIRE_GPU=1).
func deviceOrSkip(t *testing.T) *cuda.Device { return gputest.CUDA(t) }

// inputs draws the graph's run-time inputs at env: floats in [-8, 8), integers in
// [-3, 4].
func (l *lowered) inputs(t testing.TB, env map[string]int64, seed uint64) map[string]ref.Value {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 11))
	out := map[string]ref.Value{}
	for v, name := range l.params {
		shape := make(tensor.Shape, len(v.Type.Shape))
		for k, d := range v.Type.Shape {
			x, ok := d.Eval(env)
			if !ok {
				t.Fatalf("extent %v at %v", d, env)
			}
			shape[k] = int(x)
		}
		vals := make([]float64, shape.NumElements())
		for k := range vals {
			if v.Type.DType.IsFloat() {
				vals[k] = r.Float64()*16 - 8
			} else {
				vals[k] = float64(r.IntN(8) - 3)
			}
		}
		out[name] = tensor.FromFloat64s(v.Type.DType, shape, vals)
	}
	return out
}

// canaryBytes follow each output, filled with canary: more than the largest tail (255
// elements of 8 bytes).
const (
	canaryBytes = 4096
	canary      = 0xa5
)

// at evaluates a launch extent at the dims' values.
func (l *lowered) at(e loopir.Expr, env map[string]int64) (int, error) {
	m := map[*loopir.Var]loopir.Expr{}
	for _, d := range l.f.Dims {
		v, ok := env[d.Name]
		if !ok {
			return 0, fmt.Errorf("dim %s has no value in %v", d.Name, env)
		}
		m[d] = loopir.Int(v)
	}
	c, ok := loopir.NewAnalyzer(nil).Simplify(loopir.Substitute(e, m)).(*loopir.IntImm)
	if !ok {
		return 0, fmt.Errorf("extent %s is not constant at %v", loopir.ExprString(e), env)
	}
	return int(c.V), nil
}

// run launches the kernel at env on d with the derived geometry and compares its output
// with the reference evaluator's.
func (l *lowered) run(t *testing.T, d devices.Device, k devices.Kernel, name string, env map[string]int64, seed uint64) {
	t.Helper()
	in := l.inputs(t, env, seed)
	res, err := ref.Eval(l.m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	got, g, err := l.exec(t, d, k, env, in, want.Shape)
	if err != nil {
		t.Fatalf("%s at %v: launch %+v: %v", name, env, g, err)
	}
	nt.CloseTensor(t, fmt.Sprintf("%s at %v (grid %v, block %v)", name, env, g.Grid, g.Block), got, want)
}

// exec launches the kernel at env on d with the derived geometry over the inputs in
// and returns its output of the given shape, the geometry, and the launch's error
// (Sync's: a kernel's failure). A write past the output's end fails the test.
func (l *lowered) exec(t *testing.T, d devices.Device, k devices.Kernel, env map[string]int64, in map[string]ref.Value, shape tensor.Shape) (*tensor.Tensor, devices.Geometry, error) {
	t.Helper()
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	alloc := func(raw []byte, n int) devices.Buffer {
		b, err := d.Alloc(int64(max(n, 1)))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if raw != nil {
			if err := d.CopyIn(b, raw); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	for _, p := range l.impl.Params {
		v := l.nodes[p.Node].Inputs[p.Input]
		x := v.Const
		if x == nil {
			x = in[l.params[v]].(*tensor.Tensor)
		}
		raw, err := x.Raw()
		if err != nil {
			t.Fatal(err)
		}
		alloc(raw, len(raw))
	}
	out := l.f.Params[len(l.f.Params)-1]
	nbytes := out.DT.Size() * shape.NumElements()
	// the output is followed by a canary, which a thread past the tail would overwrite
	fill := make([]byte, nbytes+canaryBytes)
	for i := range fill {
		fill[i] = canary
	}
	ob := alloc(fill, len(fill))
	var g devices.Geometry
	var err error
	for i := range 3 {
		if g.Grid[i], err = l.at(l.launch.Grid[i], env); err != nil {
			t.Fatal(err)
		}
		if g.Block[i], err = l.at(l.launch.Block[i], env); err != nil {
			t.Fatal(err)
		}
	}
	dims := make([]int64, len(l.f.Dims))
	for i, dv := range l.f.Dims {
		dims[i] = env[dv.Name]
	}
	if err := d.Launch(k, g, bufs, dims); err != nil {
		return nil, g, err
	}
	if err := d.Sync(); err != nil {
		return nil, g, err
	}
	raw := make([]byte, len(fill))
	if err := d.CopyOut(raw, ob); err != nil {
		t.Fatal(err)
	}
	for i, x := range raw[nbytes:] {
		if x != canary {
			t.Fatalf("at %v: byte %d past the output's end was written", env, i)
		}
	}
	got, err := tensor.FromRaw(out.DT, shape, raw[:nbytes])
	if err != nil {
		t.Fatal(err)
	}
	return got, g, nil
}

// cudaSource prints the case's kernel in CUDA C.
func (l *lowered) cudaSource(t testing.TB) codegen.Source {
	t.Helper()
	src, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, l.f)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
