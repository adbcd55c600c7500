package passes

import (
	"context"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// EvalFunc evaluates one node on constant inputs (nil entries: omitted inputs) and
// returns one tensor per output.
type EvalFunc func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error)

// Context is what passes may use besides the module.
type Context struct {
	// Dims binds symbolic dims to values (bind-dims); symbols not listed stay symbolic.
	Dims map[string]int64
	// Eval folds constant nodes on the host; nil disables folding.
	Eval EvalFunc
	// FoldLimit is the most elements a folded result may have when it is larger than
	// its inputs together (0: 1<<16); a result no larger than its inputs always folds.
	FoldLimit int64
	// FoldWork is the most operations (multiply-adds, about) folding one node may take
	// on the host (0: 1<<28); a node above it stays a node and runs as a kernel.
	FoldWork int64
	// FoldBudget is the most operations one fold-constants run may spend on all the
	// nodes it folds (0: 1<<32); the nodes past it stay nodes.
	FoldBudget int64
	// Layout says which nodes have blocked-layout kernels (alter-layout); nil: every
	// value stays plain.
	Layout *LayoutPolicy
	// IntegerQDQ says which convolutions in the QDQ form run as QLinearConv (qdq-conv:
	// where the backend's integer kernels are faster than its float ones); nil: none.
	IntegerQDQ func(conv *graph.Node) bool
	// Fuse limits the groups of fuse-ops (zero fields: the defaults).
	Fuse FuseLimits
	// Scopes says which kernels take textures (annotate-scopes); nil: every tensor
	// lives in global memory, as on the CPU.
	Scopes *ScopePolicy
	// Scoped, when set, is told annotate-scopes' decision on every value the Scopes
	// policy could have put in a texture (the scope and packing, or why it stays
	// global): per Func, its constants, then its nodes' outputs in order.
	Scoped func(ScopeDecision)
	// SplitsAsSlices rewrites Splits into Slices (split-to-slices): for targets whose
	// kernels write one output each.
	SplitsAsSlices bool
	// Check runs graph.Verify after every pass.
	Check bool
	// Ctx stops the pipeline when it is done (nil: never): it is checked before every
	// pass and inside the passes whose nodes cost more than a table lookup each
	// (fold-constants evaluates nodes), and the error wraps its cause.
	Ctx context.Context
	// Dump, when set, is called with the module's text before and after the named
	// pass (kiln compile --dump=PASS).
	Dump     func(pass string, before, after string)
	DumpPass string
}

// Pass is one named rewrite of a module.
type Pass struct {
	Name string
	Run  func(*Context, *graph.Module) error
	// Required passes run at every optimization level (the compiler needs their result).
	Required bool
}

// Pipeline is an ordered table of passes.
type Pipeline []Pass

// Compile is the pipeline the compiler runs by default: Level(3).
func Compile() Pipeline { return Level(3) }

// Level is the named pipeline O0..O3 (levels above 3 are 3): O0 only what compiling
// needs (bound shapes, folded constants, no dead code, memory scopes), O1 adds
// simplification, recognition of decomposed ops, CSE, batch-norm folding and fusion,
// O2 and O3 add alter-layout. Every pipeline satisfies the ordering constraints
// (checked here and by a test).
func Level(o int) Pipeline {
	all := []struct {
		level int
		pass  Pass
	}{
		{0, Pass{Name: "bind-dims", Run: BindDims, Required: true}},
		{0, Pass{Name: "widen-half", Run: WidenHalf, Required: true}},
		{1, Pass{Name: "qdq-conv", Run: QDQConv}},
		{0, Pass{Name: "fold-constants", Run: FoldConstants, Required: true}},
		{0, Pass{Name: "stub-branches", Run: StubBranches, Required: true}},
		{0, Pass{Name: "split-to-slices", Run: SplitToSlices, Required: true}},
		{1, Pass{Name: "simplify", Run: Simplify}},
		{1, Pass{Name: "recognize", Run: Recognize}},
		{1, Pass{Name: "cse", Run: CSE}},
		{1, Pass{Name: "fold-batchnorm", Run: FoldBatchNorm}},
		{1, Pass{Name: "convtranspose-to-conv", Run: ConvTransposeAsConv}},
		{1, Pass{Name: "conv1d-to-conv2d", Run: Conv1DAsConv2D}},
		{1, Pass{Name: "conv3d-to-conv2d", Run: Conv3DAsConv2D}},
		{1, Pass{Name: "trim-conv-taps", Run: TrimConvTaps}},
		{1, Pass{Name: "stft-to-matmul", Run: STFTAsMatMul}},
		{0, Pass{Name: "dce", Run: DCE, Required: true}},
		{2, Pass{Name: "pad-channels", Run: PadChannels}},
		{2, Pass{Name: "alter-layout", Run: AlterLayout}},
		{1, Pass{Name: "fuse-ops", Run: FuseOps}},
		{0, Pass{Name: "annotate-scopes", Run: AnnotateScopes, Required: true}},
	}
	var p Pipeline
	for _, e := range all {
		if e.level <= o || e.pass.Required {
			p = append(p, e.pass)
		}
	}
	if err := p.Check(); err != nil {
		panic("BUG: " + err.Error())
	}
	return p
}

// Constraint orders two passes: Before must run before After when both are present.
type Constraint struct {
	Before, After string
	Why           string
}

// Constraints are the ordering rules every pipeline obeys.
var Constraints = []Constraint{
	{"bind-dims", "fold-constants", "Shape and shape arithmetic fold only once dims are bound"},
	{"widen-half", "fold-constants", "half-precision constants fold in float32, as the kernels compute them"},
	{"fold-constants", "stub-branches", "a branch types for the bound shapes only once its pads and shape arithmetic are folded"},
	{"stub-branches", "simplify", "the rewrites see the static types an If takes from its branch that runs"},
	{"fold-constants", "fold-batchnorm", "batch-norm parameters and weights must be constants"},
	{"fold-constants", "simplify", "x+0 and x·1 are seen once the constant is folded"},
	{"simplify", "dce", "simplify leaves the bypassed nodes for dce to remove"},
	{"fold-constants", "recognize", "patterns match constants by value once they are folded"},
	{"recognize", "dce", "recognize leaves the replaced subgraphs for dce to remove"},
	{"cse", "dce", "cse leaves the duplicates for dce to remove"},
	{"fold-batchnorm", "alter-layout", "a folded batch norm leaves a conv the blocked strategy takes"},
	{"dce", "alter-layout", "layouts are chosen for the nodes that remain"},
	{"fold-batchnorm", "pad-channels", "the folded convolution's weights and bias are what is padded"},
	{"recognize", "pad-channels", "a recognized HardSwish is one channel-wise op of a region"},
	{"dce", "pad-channels", "a dead reader would keep a region from being padded"},
	{"pad-channels", "alter-layout", "the padded channels are what the blocks divide"},
	{"alter-layout", "fuse-ops", "groups form around the layout transforms alter-layout inserts"},
	{"dce", "fuse-ops", "dead nodes would join groups"},
	{"alter-layout", "annotate-scopes", "a texture holds a channel-blocked layout"},
	{"fuse-ops", "annotate-scopes", "the readers of a value are the kernels, fused groups included"},
	{"recognize", "fuse-ops", "a recognized LayerNorm or GELU is one member, not a dozen"},
	{"fold-constants", "convtranspose-to-conv", "the transposed weights must be constants"},
	{"convtranspose-to-conv", "dce", "the transposed weights are left for dce to remove"},
	{"convtranspose-to-conv", "alter-layout", "the 1×1 Conv takes the blocked layout"},
	{"fold-constants", "conv1d-to-conv2d", "the weights must be constants"},
	{"conv1d-to-conv2d", "dce", "the 1-D weights are left for dce to remove"},
	{"conv1d-to-conv2d", "alter-layout", "the 2-D Conv takes the blocked layout"},
	{"fold-constants", "trim-conv-taps", "the weights must be constants"},
	{"fold-constants", "conv3d-to-conv2d", "the weights must be constants"},
	{"fold-batchnorm", "conv3d-to-conv2d", "the folded weights are what is reshaped"},
	{"conv3d-to-conv2d", "dce", "the 3-D weights are left for dce to remove"},
	{"conv3d-to-conv2d", "alter-layout", "the 2-D Conv takes the blocked layout"},
	{"conv3d-to-conv2d", "trim-conv-taps", "the 2-D Conv's spatial taps are trimmed as any 2-D Conv's"},
	{"conv1d-to-conv2d", "trim-conv-taps", "a 1-D Conv's taps are trimmed as the 2-D Conv's"},
	{"fold-batchnorm", "trim-conv-taps", "the folded weights are what is sliced"},
	{"trim-conv-taps", "dce", "the untrimmed weights are left for dce to remove"},
	{"trim-conv-taps", "pad-channels", "the trimmed Conv's weights are what is padded"},
	{"fold-constants", "stft-to-matmul", "the frame step, window and frame length must be constants"},
	{"stft-to-matmul", "fuse-ops", "the DFT's MatMul and Gather fuse as any others"},
}

// Check verifies the pipeline against Constraints and that no pass appears twice.
func (p Pipeline) Check() error {
	pos := map[string]int{}
	for i, pass := range p {
		if _, dup := pos[pass.Name]; dup {
			return fmt.Errorf("pass %s appears twice", pass.Name)
		}
		pos[pass.Name] = i
	}
	for _, c := range Constraints {
		b, okb := pos[c.Before]
		a, oka := pos[c.After]
		if okb && oka && b > a {
			return fmt.Errorf("pass %s must run before %s: %s", c.Before, c.After, c.Why)
		}
	}
	return nil
}

// Run applies the passes in order. A failing or panicking pass, or one that leaves the
// module invalid (with Check), stops the pipeline with an error naming it.
func (p Pipeline) Run(ctx *Context, m *graph.Module) error {
	for _, pass := range p {
		if err := runPass(pass, ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func runPass(pass Pass, ctx *Context, m *graph.Module) (err error) {
	if err := ctx.stopped(); err != nil {
		return fmt.Errorf("graph pass %s not started: %w", pass.Name, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("graph pass %s: BUG: panic: %v", pass.Name, r)
		}
	}()
	var before string
	if ctx.Dump != nil && ctx.DumpPass == pass.Name {
		before = graph.Print(m)
	}
	if err := pass.Run(ctx, m); err != nil {
		return fmt.Errorf("graph pass %s: %w", pass.Name, err)
	}
	if before != "" {
		ctx.Dump(pass.Name, before, graph.Print(m))
	}
	if ctx.Check {
		if err := graph.Verify(m); err != nil {
			return fmt.Errorf("graph pass %s left an invalid module: %w", pass.Name, err)
		}
	}
	return nil
}

// stopped returns why Ctx is done (its cause), or nil while the pipeline may go on.
func (ctx *Context) stopped() error {
	if ctx.Ctx == nil || ctx.Ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx.Ctx)
}

// Without returns the pipeline minus the named passes (a required pass stays).
func (p Pipeline) Without(names ...string) Pipeline {
	var out Pipeline
	for _, pass := range p {
		if pass.Required || !slices.Contains(names, pass.Name) {
			out = append(out, pass)
		}
	}
	return out
}
