// Package intrin declares the tensor intrinsics that schedule.Tensorize maps loop nests
// onto: small tile computations with a hand-declared implementation per code generation
// dialect, each with its meaning stated as a loopir description.
//
// Model: an intrinsic is data (loopir.TensorIntrin). Its description is a perfect loop
// nest around one block; its C implementation is generated here from a few parameters
// (vector lanes, tile rows, vectors per row) as header-free C with GCC/Clang vector
// extensions, fully unrolled so that the accumulator tile lives in registers. Operators
// never contain hand-written C: strategies (kernels/cpu) schedule a te compute definition
// and tensorize its innermost tile onto one of these.
//
// Invariants: an implementation computes exactly its description for every run-time
// extent its calling convention allows (Partial loops down to 0, any K). The tests live
// with the strategies that use them (kernels/cpu: every micro-kernel the host can run, in
// both forms, against the reference evaluator with tails in m, n and K) and in schedule
// (the portable one). The table is built by Table and Gemms, never in init().
//
// The GEMM micro-kernels come in one family per instruction set (tiles.go): a default
// tile and narrower ones, each with its rows sized to the register file (accumulators,
// B's vectors and a broadcast within 32 zmm or 16 ymm registers). GemmTile chooses one
// per product from its column and row counts only (the default where its width divides
// the columns, else the tile that computes the fewest padded slots, the wider on a tie),
// so that a layout decided before the strategy runs can repeat the choice.
//
// References: the outer-product micro-kernels of GotoBLAS/BLIS (Goto & van de Geijn,
// "Anatomy of High-Performance Matrix Multiplication", 2008) and TVM's tensorize.
package intrin
