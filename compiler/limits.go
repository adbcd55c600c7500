package compiler

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
)

// ErrTooLarge is wrapped when a graph exceeds one of the GraphLimits; nothing was compiled.
var ErrTooLarge = errors.New("graph exceeds a compile limit")

// ErrTimeout is wrapped (with context.DeadlineExceeded) when Options.Timeout passes
// before the compile ends: the engine's sentinel.
var ErrTimeout = engine.ErrTimeout

// The default GraphLimits: ten times the largest real ONNX graphs in nodes (about 100k) and
// in nesting (control flow a few levels deep), and a few times the widest nodes (a
// Concat of hundreds of inputs). A node's kernel grows with its inputs, and the C
// compiler's time faster: a Concat of 1024 inputs takes it 5 s, one of 4096 about a
// minute, so wider nodes are refused rather than left to the timeout.
const (
	DefaultMaxNodes      = 1 << 20
	DefaultMaxNodeInputs = 1 << 12
	DefaultMaxInputs     = 1 << 23
	DefaultMaxDepth      = 64
)

// GraphLimits bound the graph a compile accepts. They are checked before any work on the
// graph (the walk stops at the first excess), so a model file cannot make the compiler
// spend its time or memory on a graph no real model has. Zero fields take the defaults.
type GraphLimits struct {
	MaxNodes      int // nodes of all Funcs together, subgraphs included
	MaxNodeInputs int // inputs of one node
	MaxInputs     int // inputs of all nodes together
	MaxDepth      int // nesting of subgraphs (If/Loop/Scan bodies); the main Func is 0
}

func (l GraphLimits) withDefaults() GraphLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxNodes, DefaultMaxNodes)
	def(&l.MaxNodeInputs, DefaultMaxNodeInputs)
	def(&l.MaxInputs, DefaultMaxInputs)
	def(&l.MaxDepth, DefaultMaxDepth)
	return l
}

// checkLimits walks m and returns an error wrapping ErrTooLarge at the first limit it
// exceeds, naming the limit and where.
func checkLimits(m *graph.Module, lim GraphLimits) error {
	lim = lim.withDefaults()
	nodes, inputs := 0, 0
	var walk func(f *graph.Func, depth int) error
	walk = func(f *graph.Func, depth int) error {
		if depth > lim.MaxDepth {
			return fmt.Errorf("%w: subgraph @%s is nested %d deep, more than GraphLimits.MaxDepth (%d)", ErrTooLarge, f.Name, depth, lim.MaxDepth)
		}
		for _, n := range f.Nodes {
			if nodes++; nodes > lim.MaxNodes {
				return fmt.Errorf("%w: more than GraphLimits.MaxNodes (%d) nodes", ErrTooLarge, lim.MaxNodes)
			}
			if len(n.Inputs) > lim.MaxNodeInputs {
				return fmt.Errorf("%w: %v has %d inputs, more than GraphLimits.MaxNodeInputs (%d)", ErrTooLarge, n, len(n.Inputs), lim.MaxNodeInputs)
			}
			if inputs += len(n.Inputs); inputs > lim.MaxInputs {
				return fmt.Errorf("%w: more than GraphLimits.MaxInputs (%d) node inputs in all", ErrTooLarge, lim.MaxInputs)
			}
			for _, sub := range n.Subgraphs() {
				if err := walk(sub, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(m.Main, 0)
}

// stopped returns why the compile's context is done (its cause), or nil.
func (c *compile) stopped() error {
	if c.opts.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.opts.Context)
}
