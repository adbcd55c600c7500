package graph

// Op identifies an operator. The set is the standard ONNX domain (ai.onnx) that kiln
// knows about; an Op that has no row in the op table is known by name but not supported.
type Op uint16

const (
	OpInvalid Op = iota
	// elementwise unary
	OpAbs
	OpAcos
	OpAcosh
	OpAsin
	OpAsinh
	OpAtan
	OpAtanh
	OpCeil
	OpCos
	OpCosh
	OpErf
	OpExp
	OpFloor
	OpLog
	OpNeg
	OpReciprocal
	OpRound
	OpSigmoid
	OpSign
	OpSin
	OpSinh
	OpSqrt
	OpTan
	OpTanh
	OpNot
	OpIsNaN
	OpIsInf
	OpRelu
	OpLeakyRelu
	OpElu
	OpSelu
	OpCelu
	OpHardSigmoid
	OpHardSwish
	OpSoftplus
	OpSoftsign
	OpThresholdedRelu
	OpShrink
	OpMish
	OpGelu
	OpIdentity
	OpCast
	OpCastLike
	OpClip
	OpBitwiseNot
	// elementwise binary / n-ary
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpPow
	OpMod
	OpAnd
	OpOr
	OpXor
	OpEqual
	OpGreater
	OpGreaterOrEqual
	OpLess
	OpLessOrEqual
	OpBitShift
	OpBitwiseAnd
	OpBitwiseOr
	OpBitwiseXor
	OpPRelu
	OpMax
	OpMin
	OpMean
	OpSum
	OpWhere
	// neural network
	OpConv
	OpConvTranspose
	OpConvInteger
	OpMaxPool
	OpAveragePool
	OpLpPool
	OpGlobalAveragePool
	OpGlobalMaxPool
	OpGlobalLpPool
	OpMaxUnpool
	OpBatchNormalization
	OpInstanceNormalization
	OpLayerNormalization
	OpLRN
	OpMeanVarianceNormalization
	OpLpNormalization
	OpGroupNormalization
	OpGemm
	OpMatMul
	OpMatMulInteger
	OpSoftmax
	OpLogSoftmax
	OpHardmax
	OpDropout
	OpEinsum
	OpQuantizeLinear
	OpDequantizeLinear
	OpDynamicQuantizeLinear
	OpQLinearConv
	OpQLinearMatMul
	OpGridSample
	OpAffineGrid
	OpCol2Im
	OpRoiAlign
	OpNonMaxSuppression
	OpNegativeLogLikelihoodLoss
	OpSoftmaxCrossEntropyLoss
	OpMaxRoiPool
	OpLSTM
	OpGRU
	OpRNN
	// reductions
	OpReduceSum
	OpReduceMean
	OpReduceMax
	OpReduceMin
	OpReduceProd
	OpReduceL1
	OpReduceL2
	OpReduceLogSum
	OpReduceLogSumExp
	OpReduceSumSquare
	OpArgMax
	OpArgMin
	// shape and data movement
	OpReshape
	OpTranspose
	OpConcat
	OpSplit
	OpSlice
	OpGather
	OpGatherElements
	OpGatherND
	OpScatter
	OpScatterElements
	OpScatterND
	OpSqueeze
	OpUnsqueeze
	OpExpand
	OpTile
	OpPad
	OpCenterCropPad
	OpShape
	OpSize
	OpConstantOfShape
	OpRange
	OpFlatten
	OpDepthToSpace
	OpSpaceToDepth
	OpOneHot
	OpNonZero
	OpTopK
	OpCumSum
	OpTrilu
	OpCompress
	OpEyeLike
	OpResize
	OpUpsample
	OpUnique
	OpReverseSequence
	OpDet
	OpRandomNormal
	OpRandomUniform
	OpRandomNormalLike
	OpRandomUniformLike
	OpMultinomial
	OpBernoulli
	OpHannWindow
	OpHammingWindow
	OpBlackmanWindow
	OpDFT
	OpSTFT
	OpMelWeightMatrix
	// sequences and optionals
	OpSequenceConstruct
	OpSequenceEmpty
	OpSequenceAt
	OpSequenceInsert
	OpSequenceErase
	OpSequenceLength
	OpSplitToSequence
	OpConcatFromSequence
	OpSequenceMap
	OpOptional
	OpOptionalGetElement
	OpOptionalHasElement
	// control flow
	OpIf
	OpLoop
	OpScan
	// strings and text
	OpStringNormalizer
	OpTfIdfVectorizer
	// training optimizers (domain ai.onnx.preview.training)
	OpAdagrad
	OpAdam
	OpMomentum
	// kiln's own ops (domain "kiln"): made by passes, never read from a model file
	OpLayoutTransform
	OpFused
	OpShapeExpr
	OpAttentionMask
	OpFail

	NumOps // count; not an op
)

// opNames are the ONNX op_type strings, indexed by Op. They are the only place where op
// names live in the graph package; the loader maps through LookupOp.
var opNames = [NumOps]string{
	OpInvalid: "<invalid>",
	OpAbs:     "Abs", OpAcos: "Acos", OpAcosh: "Acosh", OpAsin: "Asin", OpAsinh: "Asinh",
	OpAtan: "Atan", OpAtanh: "Atanh", OpCeil: "Ceil", OpCos: "Cos", OpCosh: "Cosh",
	OpErf: "Erf", OpExp: "Exp", OpFloor: "Floor", OpLog: "Log", OpNeg: "Neg",
	OpReciprocal: "Reciprocal", OpRound: "Round", OpSigmoid: "Sigmoid", OpSign: "Sign",
	OpSin: "Sin", OpSinh: "Sinh", OpSqrt: "Sqrt", OpTan: "Tan", OpTanh: "Tanh", OpNot: "Not",
	OpIsNaN: "IsNaN", OpIsInf: "IsInf", OpRelu: "Relu", OpLeakyRelu: "LeakyRelu", OpElu: "Elu",
	OpSelu: "Selu", OpCelu: "Celu", OpHardSigmoid: "HardSigmoid", OpHardSwish: "HardSwish",
	OpSoftplus: "Softplus", OpSoftsign: "Softsign", OpThresholdedRelu: "ThresholdedRelu",
	OpShrink: "Shrink", OpMish: "Mish", OpGelu: "Gelu", OpIdentity: "Identity", OpCast: "Cast",
	OpCastLike: "CastLike", OpClip: "Clip", OpBitwiseNot: "BitwiseNot",
	OpAdd: "Add", OpSub: "Sub", OpMul: "Mul", OpDiv: "Div", OpPow: "Pow", OpMod: "Mod",
	OpAnd: "And", OpOr: "Or", OpXor: "Xor", OpEqual: "Equal", OpGreater: "Greater",
	OpGreaterOrEqual: "GreaterOrEqual", OpLess: "Less", OpLessOrEqual: "LessOrEqual",
	OpBitShift: "BitShift", OpBitwiseAnd: "BitwiseAnd", OpBitwiseOr: "BitwiseOr",
	OpBitwiseXor: "BitwiseXor", OpPRelu: "PRelu", OpMax: "Max", OpMin: "Min", OpMean: "Mean",
	OpSum: "Sum", OpWhere: "Where",
	OpConv: "Conv", OpConvTranspose: "ConvTranspose", OpConvInteger: "ConvInteger",
	OpMaxPool: "MaxPool", OpAveragePool: "AveragePool", OpLpPool: "LpPool",
	OpGlobalAveragePool: "GlobalAveragePool", OpGlobalMaxPool: "GlobalMaxPool",
	OpGlobalLpPool: "GlobalLpPool", OpMaxUnpool: "MaxUnpool",
	OpBatchNormalization: "BatchNormalization", OpInstanceNormalization: "InstanceNormalization",
	OpLayerNormalization: "LayerNormalization", OpLRN: "LRN",
	OpMeanVarianceNormalization: "MeanVarianceNormalization", OpLpNormalization: "LpNormalization",
	OpGroupNormalization: "GroupNormalization", OpGemm: "Gemm", OpMatMul: "MatMul", OpMatMulInteger: "MatMulInteger", OpSoftmax: "Softmax",
	OpLogSoftmax: "LogSoftmax", OpHardmax: "Hardmax", OpDropout: "Dropout", OpEinsum: "Einsum",
	OpQuantizeLinear: "QuantizeLinear", OpDequantizeLinear: "DequantizeLinear",
	OpDynamicQuantizeLinear: "DynamicQuantizeLinear", OpQLinearConv: "QLinearConv",
	OpQLinearMatMul: "QLinearMatMul", OpGridSample: "GridSample", OpAffineGrid: "AffineGrid", OpCol2Im: "Col2Im", OpRoiAlign: "RoiAlign",
	OpNonMaxSuppression: "NonMaxSuppression", OpNegativeLogLikelihoodLoss: "NegativeLogLikelihoodLoss",
	OpSoftmaxCrossEntropyLoss: "SoftmaxCrossEntropyLoss", OpMaxRoiPool: "MaxRoiPool", OpLSTM: "LSTM", OpGRU: "GRU", OpRNN: "RNN",
	OpReduceSum: "ReduceSum", OpReduceMean: "ReduceMean", OpReduceMax: "ReduceMax",
	OpReduceMin: "ReduceMin", OpReduceProd: "ReduceProd", OpReduceL1: "ReduceL1",
	OpReduceL2: "ReduceL2", OpReduceLogSum: "ReduceLogSum", OpReduceLogSumExp: "ReduceLogSumExp",
	OpReduceSumSquare: "ReduceSumSquare", OpArgMax: "ArgMax", OpArgMin: "ArgMin",
	OpReshape: "Reshape", OpTranspose: "Transpose", OpConcat: "Concat", OpSplit: "Split",
	OpSlice: "Slice", OpGather: "Gather", OpGatherElements: "GatherElements",
	OpGatherND: "GatherND", OpScatter: "Scatter", OpScatterElements: "ScatterElements",
	OpScatterND: "ScatterND", OpSqueeze: "Squeeze", OpUnsqueeze: "Unsqueeze", OpExpand: "Expand",
	OpTile: "Tile", OpPad: "Pad", OpCenterCropPad: "CenterCropPad", OpShape: "Shape", OpSize: "Size",
	OpConstantOfShape: "ConstantOfShape", OpRange: "Range", OpFlatten: "Flatten",
	OpDepthToSpace: "DepthToSpace", OpSpaceToDepth: "SpaceToDepth", OpOneHot: "OneHot",
	OpNonZero: "NonZero", OpTopK: "TopK", OpCumSum: "CumSum", OpTrilu: "Trilu",
	OpCompress: "Compress", OpEyeLike: "EyeLike", OpResize: "Resize", OpUpsample: "Upsample",
	OpUnique: "Unique", OpReverseSequence: "ReverseSequence", OpDet: "Det",
	OpRandomNormal: "RandomNormal", OpRandomUniform: "RandomUniform",
	OpRandomNormalLike: "RandomNormalLike", OpRandomUniformLike: "RandomUniformLike",
	OpMultinomial: "Multinomial", OpBernoulli: "Bernoulli", OpHannWindow: "HannWindow",
	OpHammingWindow: "HammingWindow", OpBlackmanWindow: "BlackmanWindow", OpDFT: "DFT",
	OpSTFT: "STFT", OpMelWeightMatrix: "MelWeightMatrix",
	OpSequenceConstruct: "SequenceConstruct", OpSequenceEmpty: "SequenceEmpty",
	OpSequenceAt: "SequenceAt", OpSequenceInsert: "SequenceInsert",
	OpSequenceErase: "SequenceErase", OpSequenceLength: "SequenceLength",
	OpSplitToSequence: "SplitToSequence", OpConcatFromSequence: "ConcatFromSequence",
	OpSequenceMap: "SequenceMap", OpOptional: "Optional",
	OpOptionalGetElement: "OptionalGetElement", OpOptionalHasElement: "OptionalHasElement",
	OpIf: "If", OpLoop: "Loop", OpScan: "Scan",
	OpStringNormalizer: "StringNormalizer", OpTfIdfVectorizer: "TfIdfVectorizer",
	OpAdagrad: "Adagrad", OpAdam: "Adam", OpMomentum: "Momentum",
	OpLayoutTransform: "LayoutTransform", OpFused: "Fused", OpShapeExpr: "ShapeExpr",
	OpAttentionMask: "AttentionMask", OpFail: "Fail",
}
