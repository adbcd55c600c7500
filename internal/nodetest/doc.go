// Package nodetest checks one graph node lowered by a strategy table against the reference
// evaluator: build a one-node graph, evaluate it, lower, compile and run the kernel, compare.
// CheckSymbolic does it once for many shapes (one kernel over symbolic extents, run at
// several bindings of the symbols), CheckSymbolicFused for a node and its elementwise
// epilogues in one kernel; both check that no output is written past its end.
package nodetest
