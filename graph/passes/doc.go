// Package passes holds the graph-level optimizations and the named pipelines that order
// them (ARCHITECTURE.md §1). A Pass rewrites a graph.Module in place; a Pipeline is an
// ordered table of passes run with one Context. When Context.Check is set (always in
// tests), graph.Verify runs after every pass and a failure names the pass; a panic inside
// a pass is recovered into an error naming it.
//
// Today (issue #4) the pipeline holds what compiling a model needs before kernels exist:
//   - bind-dims: symbolic dims become the values of the concrete input shapes, and every
//     node's type is inferred again (subgraphs included), so shapes downstream become
//     static;
//   - fold-constants: a node whose inputs are all constants is evaluated on the host by
//     Context.Eval (the compiler passes the reference evaluator; kernels are never
//     JIT-compiled for constants) and replaced by its results; Shape and Size of
//     statically shaped values fold without evaluating anything. A size cap keeps folding
//     from materializing large tensors out of small ones;
//   - dce: nodes and constants nobody reads are removed;
//   - alter-layout: with a Context.Layout policy, convolutions store their outputs in
//     channel blocks (NCHW16c...) and values stay blocked through elementwise ops,
//     pooling and channel concats, with LayoutTransform nodes where a consumer needs
//     another order (the first piece of issue #5's AlterLayout).
//
// Issue #5 adds the optimizer proper (simplification, fusion, layout) to this table.
//
// Invariants: passes keep the module valid for graph.Verify; value identity is kept
// (a folded output becomes a constant in place, so its consumers need no rewiring).
package passes
