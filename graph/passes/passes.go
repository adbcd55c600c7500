package passes

import (
	"fmt"

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
	// Layout says which nodes have blocked-layout kernels (alter-layout); nil: every
	// value stays plain.
	Layout *LayoutPolicy
	// Check runs graph.Verify after every pass.
	Check bool
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

// Compile is the pipeline the compiler runs before lowering to kernels.
func Compile() Pipeline {
	return Pipeline{
		{Name: "bind-dims", Run: BindDims, Required: true},
		{Name: "fold-constants", Run: FoldConstants, Required: true},
		{Name: "dce", Run: DCE, Required: true},
		{Name: "alter-layout", Run: AlterLayout},
	}
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
