package compiler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// kernelUse is a node's kernel: its index in the table and how to call it.
type kernelUse struct {
	index    int
	dev      int    // the device it runs on (the executable's device index)
	why      string // why it is not on a device tried before (empty: the first)
	strategy string
	params   []kernels.Param
	outDT    []tensor.DType
	outShape [][]int64 // nil for an output of a symbolic shape
	dims     []string  // the symbols the kernel takes as runtime dims, in order
	// images is the image each argument (parameters, then outputs) is in when the
	// kernel reads or writes it as a texture (the zero image: a buffer)
	images []image
	// workload is the structural key tuning records name; tuned the choice it was
	// built with (empty: the default); space its search space when asked for
	workload string
	tuned    string
	space    []engine.TuneOption
}

// kernelUnit is one unique kernel: its translation unit and entry point.
type kernelUnit struct {
	name    string
	code    string
	inputs  int
	outputs int
	dims    []string
	args    []vm.KernelArg // what it may touch through each argument
	node    string         // the first node that uses it, for errors
	dev     int            // the device it runs on
	launch  *vm.KernelLaunch
	fn      *loopir.PrimFunc // the lowered function code prints
	binary  int              // its binary in the executable
}

type packKey struct {
	src    *tensor.Tensor
	layout string
}

// kernelTable deduplicates kernels by their generated code and repacked constants by
// (source constant, layout); byShape remembers the kernel of each structure lowered
// (kernelkey.go), so a repeated structure is lowered once.
type kernelTable struct {
	byCode  map[string]int
	byShape map[string]*kernelUse
	units   []kernelUnit
	packed  map[packKey]*tensor.Tensor
	bins    []vm.Binary // the binaries the backends built, one per device with kernels
}

func newKernelTable() *kernelTable {
	return &kernelTable{byCode: map[string]int{}, byShape: map[string]*kernelUse{}, packed: map[packKey]*tensor.Tensor{}}
}

// canonicalName is the name every kernel is emitted under for deduplication.
const canonicalName = "kiln_kernel"

// lowerKernelOn lowers n (with the other members of its fused group as epilogues, in
// topological order, when given) for device p through its strategy table, the loopir
// pipeline, the launch derivation (GPU backends) and the backend's dialect, and returns
// its entry in the kernel table. With epilogues that no strategy fuses it returns nil
// and no error.
func (c *compile) lowerKernelOn(p *place, n *graph.Node, chain []*graph.Node) (*kernelUse, error) {
	c.vars = map[string]*loopir.Var{}
	in, err := c.inputs(n)
	if err != nil {
		return nil, err
	}
	last := n
	stage := map[*graph.Value]int{n.Outputs[0]: 0}
	var epi []kernels.Epilogue
	for k, e := range chain {
		ein, err := c.inputs(e)
		if err != nil {
			return nil, err
		}
		from := make([]int, len(e.Inputs))
		for i, v := range e.Inputs {
			from[i] = -1
			if s, ok := stage[v]; ok && v != nil {
				from[i] = s
			}
		}
		epi = append(epi, kernels.Epilogue{Node: e, In: ein, From: from})
		stage[e.Outputs[0]] = k + 1
		last = e
	}
	workload := c.workloadKey(n, chain)
	impl, tuned, err := c.lowerTuned(p, n, in, epi, workload)
	if err != nil {
		return nil, err
	}
	if impl == nil && len(epi) > 0 {
		impl, err = p.strategies.LowerFused(n, in, epi, p.t)
		if errors.Is(err, kernels.ErrNotApplicable) {
			return nil, nil
		}
	} else if impl == nil {
		impl, err = p.strategies.Lower(n, in, p.t)
	}
	if err != nil {
		return nil, err
	}
	low, err := p.be.Lowering().Run(impl.Func)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	low.NoContract = c.noContract(n, chain)
	if c.opts.Lowered != nil {
		c.opts.Lowered(workload, low)
	}
	var launch *vm.KernelLaunch
	if p.be.Launches {
		if low, launch, err = c.launch(p, low); err != nil {
			return nil, fmt.Errorf("%v: %w", n, err)
		}
	}
	c.res.Stats.Strategies[impl.Strategy]++
	anchor := n
	n = last // the kernel's outputs are the chain's last node's
	use := &kernelUse{params: impl.Params, strategy: impl.Strategy, dev: p.dev, workload: workload, tuned: tuned}
	if c.opts.Tuning != nil && c.opts.Tuning.Space {
		use.space = tuneSpace(p.strategies.Space(anchor, in, epi, p.t))
	}
	if use.images, err = imagesOf(low); err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	for _, d := range low.Dims {
		use.dims = append(use.dims, d.Name)
	}
	outs := low.Params[len(impl.Params):]
	if len(outs) != len(n.Outputs) {
		return nil, fmt.Errorf("BUG: %v: kernel has %d outputs for %d node outputs", n, len(outs), len(n.Outputs))
	}
	for i, p := range outs {
		if symbolicType(n.Outputs[i].Type) {
			if p.DT != n.Outputs[i].Type.DType {
				return nil, fmt.Errorf("BUG: %v: kernel output %d is %v, the graph says %v", n, i, p.DT, n.Outputs[i].Type)
			}
			use.outDT = append(use.outDT, p.DT)
			use.outShape = append(use.outShape, nil)
			continue
		}
		shape := make([]int64, len(p.Shape))
		for k, e := range p.Shape {
			ci, ok := e.(*loopir.IntImm)
			if !ok {
				return nil, fmt.Errorf("BUG: %v: output extent %s is not static", n, loopir.ExprString(e))
			}
			shape[k] = ci.V
		}
		// a strategy may view an output with other extents (a matmul over flattened
		// rows); the bytes must agree
		want, _ := staticShape(n, n.Outputs[i])
		if p.DT != n.Outputs[i].Type.DType || tensorShape(shape).NumElements() != tensorShape(want).NumElements() {
			return nil, fmt.Errorf("BUG: %v: kernel output %d is %v%v, the graph says %v", n, i, p.DT, shape, n.Outputs[i].Type)
		}
		use.outDT = append(use.outDT, p.DT)
		use.outShape = append(use.outShape, want)
	}
	cp := *low
	cp.Name = canonicalName
	eopts := c.emitOptions(p)
	src, err := codegen.Emit(p.be.Dialect, eopts, &cp)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	args, err := kernelArgs(low)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	// a kernel is its code, what its launch checks and, on a GPU, its geometry: two
	// grids over one body (a thread's work does not depend on how many there are)
	// are two kernels
	identity := fmt.Sprintf("%s\n// device %d, arguments %v", src.Code, p.dev, args)
	if launch != nil {
		identity += fmt.Sprintf(", launch %v", *launch)
	}
	kt := c.kt
	if idx, ok := kt.byCode[identity]; ok {
		use.index = idx
		return use, nil
	}
	// named by its ops and its identity, so a kernel is the same object in every model
	// and the journal builds it once
	cp.Name = "k_" + strings.ToLower(anchor.Op.String())
	for _, e := range chain {
		cp.Name += "_" + strings.ToLower(e.Op.String())
	}
	cp.Name += "_" + digestString(identity)[:10]
	named, err := codegen.Emit(p.be.Dialect, eopts, &cp)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	use.index = len(kt.units)
	kt.byCode[identity] = use.index
	kt.units = append(kt.units, kernelUnit{name: named.Kernels[0], code: named.Code, inputs: len(impl.Params), outputs: len(outs), dims: use.dims, args: args, node: n.String(),
		dev: p.dev, launch: launch, fn: &cp})
	return use, nil
}

// inputs makes the placeholders of a node's inputs (in their storage shapes) with the
// values of constant inputs.
func (c *compile) inputs(n *graph.Node) ([]kernels.Input, error) {
	in := make([]kernels.Input, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		v = c.resolve(v)
		if v.Type.Kind != graph.KindTensor || v.Type.UnknownRank {
			return nil, fmt.Errorf("%v: input %d (%q) has type %v; kernels take ranked tensors", n, i, v.Name, v.Type)
		}
		t := v.Type
		if t.Scope == graph.ScopeTexture && t.Packing == graph.PackOIHW4o {
			// a weight in a texture is blocked on its output channels for the image: the
			// kernel that reads it so repacks the constant (Param.Prepack); to every
			// compute definition it is the plain constant
			t.Scope, t.Packing, t.Block = graph.ScopeGlobal, 0, 0
		}
		ext, err := extents(t, c.vars)
		if err != nil {
			return nil, fmt.Errorf("%v: input %d: %w", n, i, err)
		}
		in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, ext...), Const: v.Const}
	}
	return in, nil
}

func placeholder(name string, dt tensor.DType, shape []int64) *te.Tensor {
	ext := make([]loopir.Expr, len(shape))
	for i, d := range shape {
		ext[i] = loopir.Int(d)
	}
	return te.Placeholder(name, dt, ext...)
}

// prepack returns the repacked copy of a constant input (one per source and layout).
func (kt *kernelTable) prepack(v *graph.Value, p kernels.Param) (*tensor.Tensor, error) {
	if v.Const == nil {
		return nil, fmt.Errorf("BUG: a strategy repacks input %q, which is not a constant", v.Name)
	}
	k := packKey{v.Const, p.Layout}
	if t, ok := kt.packed[k]; ok {
		return t, nil
	}
	t, err := p.Prepack(v.Const)
	if err != nil {
		return nil, err
	}
	kt.packed[k] = t
	return t, nil
}

// emitOptions are the printer's options for p's kernels.
func (c *compile) emitOptions(p *place) codegen.COptions {
	eopts := p.be.Emit
	eopts.BoundsCheck = c.opts.Recipe.BoundsCheck
	return eopts
}

// build turns the unique kernels into the executable's binaries through their
// devices' backends: one binary per device that runs a kernel (a CPU compile always
// has its one, empty of kernels or not).
func (c *compile) build() error {
	kt := c.kt
	for _, p := range c.places {
		job := &BuildJob{Context: c.opts.Context, Target: p.t, Options: c.opts, Emit: c.emitOptions(p), c: c}
		var mine []int
		for i, u := range kt.units {
			if u.dev == p.dev {
				mine = append(mine, i)
				job.Kernels = append(job.Kernels, KernelSource{Name: u.name, Code: u.code, Node: u.node, Func: u.fn})
			}
		}
		if len(mine) == 0 && len(c.places) > 1 {
			continue
		}
		bin, err := p.be.Build(job)
		if err != nil {
			if len(c.places) > 1 {
				return fmt.Errorf("%s kernels: %w", p.be.Name, err)
			}
			return err
		}
		for _, i := range mine {
			kt.units[i].binary = len(kt.bins)
		}
		kt.bins = append(kt.bins, vm.Binary{Device: p.be.Device, Fingerprint: p.be.Fingerprint(c.opts), Data: bin})
	}
	c.res.Stats.KernelsCached = int(c.kernelHits.Load())
	return nil
}

// kernelInfos is the executable's kernel table.
func (kt *kernelTable) kernelInfos() []vm.KernelInfo {
	out := make([]vm.KernelInfo, len(kt.units))
	for i, u := range kt.units {
		out[i] = vm.KernelInfo{Name: u.name, Binary: u.binary, Inputs: u.inputs, Outputs: u.outputs, Dims: u.dims, Args: u.args, Launch: u.launch}
	}
	return out
}
