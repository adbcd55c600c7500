// Package schedule transforms a PrimFunc's loop nest without changing what it computes:
// TVM's TensorIR primitives applied to a concrete function. Loops and blocks are named by
// random variables (LoopRV, BlockRV) that stay valid across transformations.
//
// Every applied primitive is appended to a Trace (instruction, inputs, integer
// decisions, outputs). A trace prints as text, parses back, and replays on a fresh copy of
// the same PrimFunc to the identical result: it is both the description of a default
// schedule and, later, the tuning record.
//
// Invariants: each primitive checks its preconditions and returns an error (wrapping
// ErrSchedule) instead of producing wrong code; on error the schedule is unchanged.
//
// References: TVM TensorIR schedule primitives and trace (Feng et al., "TensorIR", 2023).
package schedule
