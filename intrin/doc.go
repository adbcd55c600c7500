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
// Warp-cooperative intrinsics (MMA, MMATF32): the tensor-core matrix multiply-accumulate
// of CUDA (mma.sync m16n8k8 on TF32 operands, cvt.rna.tf32.f32 rounding, float32
// accumulation; sm_80 and later, MMA.Supports), declared with a description of one
// thread's register-tile step and a "cuda" implementation in inline PTX that is correct
// only under the lane layout the calling schedule gives (kernels/gpu's
// ScheduleMatMulMMA, documented on MMA): the 32 lanes exchange operands through the
// instruction's fragments. MMAs lists them; the CUDA backend passes them to the GPU
// strategies as parameters.
//
// Invariants: an implementation computes exactly its description for every run-time
// extent its calling convention allows (Partial loops down to 0, any K); the one
// exception is the TF32 MMA, which computes it with its A and B operands rounded to TF32
// (what Recipe.Precision tf32 opts into; only that recipe's strategies use it). The tests live
// with the strategies that use them (kernels/cpu: every micro-kernel the host can run, in
// all forms, against the reference evaluator with tails in m, n and K) and in schedule
// (the portable one); the MMA's fragment layout is emulated lane by lane here
// (mma_test.go) and its kernels run against the reference evaluator in compiler's tests
// (on a CUDA GPU). The table is built by Table and Gemms, never in init().
//
// The GEMM micro-kernels come in one family per instruction set (tiles.go): a default
// tile and narrower ones, each with its rows sized to the register file (accumulators,
// B's vectors and a broadcast within 32 zmm or 16 ymm registers). GemmTile chooses one
// per product from its column and row counts only (the default where its width divides
// the columns, else the tile that computes the fewest padded slots, the wider on a tie;
// on output rows of at most 16 a tile may take a narrow row count, 7 for 7- and 14-wide
// rows; GemmTileMatMul on a packed matmul's rows up to 64, as ConvNeXt's 49), so that
// a layout decided before the strategy runs can repeat the choice. A tile's last vector
// may be half a vector (GemmF32Half: AVX-512's 14×24, a zmm and a ymm per row, for
// 24-channel layers; AVX512VL's masked ymm accesses), counted as its lanes. Each
// comes in three forms: Update (C += A·B), Init (C = A·B, the accumulators from zero) and Blocks
// (Init over a reduction in three loops, each with its own strides in A and B: a
// blocked convolution's input channel blocks, kernel rows and merged kernel
// column·channel axis in one call).
//
// The integer micro-kernel (gemm_int.go: GemmInt, chosen by GemmIntTile, listed by
// GemmInts) is the Blocks form over int16 operands taken in pairs, summed in int32: A's
// pair broadcast as one 32-bit element, B's pairs side by side per column (a layout
// the intrinsic fixes with Strides), one pairwise multiply-add per vector of B
// (vpdpwssd on AVX-512 VNNI, vpmaddwd and an add on AVX-512BW and AVX2, scalar C in the
// generic family). Quantized operands shifted by their zero points fit int16 and their
// products and sums fit int32 exactly, whatever the zero points (8-bit weights with
// an asymmetric zero point do not fit the 8-bit instructions). Where they do fit
// (uint8 data, weights minus their zero point within int8: symmetric int8 weights, as
// static quantization writes them), GemmU8S8 (gemm_u8s8.go, AVX-512 VNNI only) takes
// quads of bytes, uint8 A by signed B, one vpdpbusd per vector of B: twice the pairs'
// rate; the caller accounts for the data's zero point, which the kernel does not see.
//
// The depthwise tile (depthwise.go: DepthwiseF32, chosen by DepthwiseTile, listed by
// Depthwises) computes tw output columns of a depthwise convolution over a channel
// block's lanes, C[t, l] = Σ_kh Σ_kw A[t, kh, kw, l]·B[kh, kw, l] from zero, A the padded
// input row with overlapping strides along t and kw: per pass of one or two lane
// vectors its tw·nb sums stay in registers across the taps, which are a run-time loop
// (so any kernel size), in the reference's order. Declared for tw up to
// MaxDepthwiseTile on each family's vectors; a target takes the widest vector that
// divides the block.
//
// References: the outer-product micro-kernels of GotoBLAS/BLIS (Goto & van de Geijn,
// "Anatomy of High-Performance Matrix Multiplication", 2008) and TVM's tensorize.
package intrin
