package gpu_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// withRule is the lowered case l (one node, no epilogue) scheduled by rule instead of
// the strategy table's choice, named strategy.
func withRule(t *testing.T, l *lowered, strategy string, rule func(*schedule.Schedule) error) *lowered {
	t.Helper()
	syms := kernels.Syms{}
	var in []kernels.Input
	for i, v := range l.nodes[0].Inputs {
		in = append(in, kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...), Const: v.Const})
	}
	impl, err := kernels.Generic(kernels.Default(), strings.ReplaceAll(strategy, "-", "_"), l.nodes[0], in, rule)
	if err != nil {
		t.Fatal(err)
	}
	impl.Strategy = strategy
	low, err := passes.GPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	other := *l
	other.impl = impl
	if other.f, other.launch, err = passes.DeriveLaunch(low); err != nil {
		t.Fatal(err)
	}
	return &other
}

// TestLayerNormTreeAgainstOneThreadPerRowOnOpenCL runs LayerNormalization over 128 rows
// of 768 (BERT-base's hidden size at 128 tokens) on the OpenCL device with a block per
// row (the rows rule for long rows) and with one thread per row (gpu.ScheduleRows),
// checks both against the reference, and with -v logs their times (the best of five
// launches each) and the ratio: a measurement to read, not an assertion.
func TestLayerNormTreeAgainstOneThreadPerRowOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	tg := openclTarget(t, d)
	tg.GPU.ComputeUnits = max(tg.GPU.ComputeUnits, testGPU(t).GPU.ComputeUnits) // a GPU's choice
	ln := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
	ln.Axis = -1
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	c := tcase{rcase{gcase: gcase{name: "layernorm_128x768", op: graph.OpLayerNormalization, attrs: ln,
		args: []graph.Type{f32("128", "768"), f32("768"), f32("768")}}, strategy: "gpu-rows"}, true}
	tree := lowerTree(t, c, tg)
	perRow := withRule(t, tree, "one-thread-per-row", func(s *schedule.Schedule) error {
		return gpu.ScheduleRows(s, gpu.DefaultRowBlock)
	})
	times := map[*lowered]time.Duration{}
	for _, l := range []*lowered{tree, perRow} {
		mod, k := openclLoader(d)(t, l, l.impl.Strategy)
		c.run(t, l, d, k, nil, 1)
		if testing.Verbose() {
			times[l] = bestLaunch(t, d, k, l)
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if testing.Verbose() {
		t.Logf("LayerNormalization 128×768 on %s: a block per row %v (%v), one thread per row %v (%v): %.2f× the speed",
			d.Info().Name, times[tree], tree.launch, times[perRow], perRow.launch, float64(times[perRow])/float64(times[tree]))
	}
}
