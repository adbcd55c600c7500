// Package passes holds the graph-level optimizations and the named pipelines that order
// them (docs/ARCHITECTURE.md, "The pipeline", phase 2). A Pass rewrites a graph.Module in
// place; a Pipeline is an ordered table of passes run with one Context. When Context.Check is set (always in
// tests), graph.Verify runs after every pass and a failure names the pass; a panic inside
// a pass is recovered into an error naming it.
//
// Level(o) builds the named pipelines O0..O3 from one table; Constraints orders pairs of
// passes ({before, after, why}) and Pipeline.Check enforces them (at construction and in
// a test). The passes:
//   - bind-dims: symbolic dims become the values of the concrete input shapes, and every
//     node's type is inferred again (subgraphs included), so shapes downstream become
//     static;
//   - widen-half: a module holding float16 or bfloat16 values computes them in float32
//     (the kernels have no half arithmetic): values, constants, element-type attributes
//     (Cast's to, the generators' dtype) and tensor attributes become float32, in
//     subgraphs too; Main's half parameters and results keep their types, through a Cast
//     after each parameter and before each result (which keeps the result's name);
//   - qdq-conv (O1, before fold-constants, which would dequantize the weights): a
//     convolution in ONNX's QDQ form (DequantizeLinear on its data, weights and bias,
//     QuantizeLinear after it, a Relu between where the quantizer's clamp makes it)
//     becomes QLinearConv where Context.IntegerQDQ (the backend) picks it and the
//     integer operator computes the same real numbers (qdq.go): the two may then round
//     a value within float32 rounding of a half-step to either side;
//   - fold-constants: a node whose inputs are all constants is evaluated on the host by
//     Context.Eval (the compiler passes the reference evaluator; kernels are never
//     JIT-compiled for constants) and replaced by its results; Shape and Size of
//     statically shaped values fold without evaluating anything. Every node's type is
//     inferred again before it is considered, its subgraphs folded first, so that a
//     folded chain's static extents reach the nodes after it, and an If whose condition
//     became known (a rank guard) takes its branch's types. A size cap keeps folding
//     from materializing large tensors out of small ones, a work cap (FoldWork) leaves
//     a large product of constants to a kernel, and a run stops folding past FoldBudget
//     operations or four times the module's constant elements created;
//   - stub-branches: every node is inferred again after folding; a branch of an If that
//     does not type (a node's inference fails: a front end sized for other inputs than
//     the bound ones, in a model that branches on an input's value) becomes one
//     kiln.Fail per result, typed as the other branch's result and carrying the If, the
//     branch and the error, so the If keeps static types and only a run that takes the
//     branch fails; an If whose branches both fail makes its enclosing branch the one
//     stubbed. bind-dims leaves such a branch's remaining types as they were;
//   - split-to-slices (every level, with Context.SplitsAsSlices: GPU targets): a Split
//     whose parts have static extents along its axis becomes one Slice per part (constant
//     starts, ends, axis), keeping each output Value; otherwise nothing changes;
//   - simplify (O1): Identity, inference Dropout, Cast to the same type, reshapes to the
//     same shape, x+0, x-0, x·1, x/1 are bypassed (a node whose output is a result stays);
//     chains are rewritten in place, keeping each output Value (simplify_chains.go): a
//     chain of Reshape/Flatten/Squeeze/Unsqueeze on static shapes becomes one Reshape of
//     its start, Transpose∘Transpose one Transpose (none when the composed permutation is
//     the identity), and a Transpose moving only size-1 axes a Reshape, never touching
//     blocked-layout values;
//   - recognize (O1): decomposed subgraphs become single ops — LayerNorm over the last
//     axis as PyTorch exports it below opset 17 (with or without γ/β) → LayerNormalization,
//     the erf and tanh forms of GELU → Gelu, Exp/ReduceSum (with or without the ReduceMax
//     subtraction) → Softmax, BERT's (1 − Cast(mask))·K → kiln.AttentionMask (exactly
//     the chain's arithmetic, for any mask values). Matching is on the dataflow:
//     constants by value (1e-6 relative; the attention mask's 1 exactly), every
//     intermediate read only by the pattern and no result; the new node keeps the last
//     node's name and output value, dce removes the rest;
//   - cse (O1): nodes with the same op, attributes and inputs are merged;
//   - fold-batchnorm (O1): an inference BatchNormalization after a Conv with constant
//     weights is folded into the Conv's weights and bias; one that folds into no Conv
//     (after a ConvTranspose, an Add, a Conv read elsewhere) becomes x·s + t with
//     constant [C, 1, ...] operands, elementwise ops that fuse into their producer;
//   - convtranspose-to-conv (O1): a 2-D ConvTranspose whose stride equals its square
//     kernel b×b (no padding, dilation or output padding, one group, constant weight)
//     becomes a 1×1 Conv to M·b·b channels and a CRD DepthToSpace of block b (just the
//     Conv for b = 1): the same products and sums, taken by the matrix-product
//     strategies instead of a gather;
//   - conv1d-to-conv2d (O1): a 1-D Conv of a static float32 [N, C, L] input and
//     a constant weight becomes Unsqueeze (axis 2), the 2-D Conv of the same kernel, strides,
//     dilations and pads along the second axis of a one-row map, and Squeeze: the
//     blocked convolution strategies instead of the generic rule (a speech model's
//     40→192 conv over 100 steps ran at 3% of the FMA peak on the generic rule);
//   - conv3d-to-conv2d (O1): a 3-D Conv of a static float32 [N, C, T, H, W] input and a
//     constant weight becomes one 2-D Conv over [N·T', C·kT, H, W], each output frame's
//     input the kT frames its temporal taps read stacked on the channel axis (Pad along
//     T, Transpose, strided Slices, Concat, Reshape; the output reshaped and transposed
//     back): the 2-D strategies instead of the generic rule (r3d_18 at two threads:
//     3.9 s → 0.15 s); temporal kernels over 16 frames, or stacked inputs over 1 GiB,
//     stay 3-D;
//   - trim-conv-taps (O1): a Conv of a static input and constant float32 weights loses
//     the kernel taps that read only padding (the weights sliced, the pads shrunk, the
//     output unchanged: DeepLabV3's atrous 3×3 of dilation 24 and 36 over a 14×14 map
//     become 1×1); a heavy one whose outputs read through different taps along an axis
//     is split into bands (a Slice and a Conv of its taps each, a Concat), where they
//     compute at most three quarters of its products;
//   - stft-to-matmul (O1): an STFT of a real float32 signal of known length with a
//     constant frame step, window and frame length becomes Reshape, Gather (the frames,
//     overlapping), MatMul by the constant windowed DFT matrix [N, 2·bins] and Reshape:
//     the packed matrix product instead of a twiddle sum no schedule vectorizes (each
//     constant it makes at most maxSTFTConstant elements, else the STFT stays);
//   - dce: nodes and constants nobody reads are removed;
//   - pad-channels (O2): with a Context.Layout policy's ChannelMultiple (the CPU's vector
//     lanes), a region of M channels between convolutions (depthwise convs, channel-
//     wise elementwise ops, global pools, squeeze-and-excitation) that the multiple
//     does not divide is widened to the next multiple when that adds at most a fifth:
//     zero filters and bias in the convolutions writing it, zero input channels in
//     those reading it, so every value outside it is unchanged (MobileNetV3's 72, 120,
//     184 and 200 channels compute in whole AVX-512 vectors, as ONNX Runtime pads them);
//   - alter-layout (O2): with a Context.Layout policy, convolutions store their outputs
//     in channel blocks (NCHW16c...) where a reader takes them so, and values stay
//     blocked through the nodes the policy accepts (elementwise ops with broadcast
//     operands, pooling, global pools whose readers take blocks, Resize, channel
//     concats), with LayoutTransform nodes where a consumer needs another order; a
//     node whose only blocked inputs broadcast onto its output runs plain; the main
//     function's nodes only, and a subgraph (If, Loop, Scan) reads each value it
//     captures through a plain copy made before the node that holds it;
//   - fuse-ops (O1): TVM's FuseOps on each Func (fuse.go has the rules): a post-dominator
//     tree, three phases, a group pattern; conv/matmul/pool absorb the elementwise and
//     broadcast chains after them, elementwise and injective ops fuse into their
//     post-dominator, reductions only receive, nothing crosses control flow, at most
//     Context.Fuse.MaxOps (256) members and MaxArgs arguments. A group becomes one
//     kiln.Fused node whose body is the group (its constants inside), one kernel later;
//   - annotate-scopes: every tensor gets a memory scope, global unless a Context.Scopes
//     policy (OpenCL textures) says its producer and every reader take an RGBA texture
//     of some packing (graph.Packing) whose image fits the policy's limits; the most
//     balanced image among those that fit wins; a constant weight read only by kernels
//     that take a texture-weight becomes one (blocked by output channels). Each value a
//     policy could have placed gets a ScopeDecision (Context.Scoped): its packing and
//     image, or a ScopeCause (a reader, the images measured against the limit).
//
// Attention patterns beyond softmax and the additive mask are not recognized.
//
// Cost: no pass is worse than O(n log n) in the nodes and inputs of the module, so that
// no model file can hold the compiler for long (a 300k-node chain runs the O3 pipeline
// in seconds, a node with 2M inputs likewise); bind-dims alone grows with the square of
// the Loop nesting depth, which the compiler bounds. The mechanisms: passes that bypass
// nodes (simplify, cse) rewire each node as they visit it through a forwarding map
// instead of rewriting every reader at each bypass; cse buckets nodes by a hash of
// their inputs; dce and recognize find the live nodes in one backward walk, and
// recognize flattens no more of a product than a pattern has factors; fuse-ops keeps
// one edge per consumer, finds post-dominators by binary lifting, and stops each path
// walk at MaxOps nodes (and a budget of edges); alter-layout remembers its answers per
// value; bind-dims remembers which carried types each Loop keeps; new names come from
// a counter per base name. Folding is bounded by work as well as by size, per node and
// per run (Context.FoldWork, FoldBudget, and the elements created, which stay in memory
// until dce).
// Context.Ctx stops a pipeline before each pass and between the nodes that bind-dims
// and fold-constants infer or evaluate; a stopped pipeline leaves the module half
// rewritten.
//
// Invariants: passes keep the module valid for graph.Verify; value identity is kept
// (a folded output becomes a constant in place, so its consumers need no rewiring).
package passes
