package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// The text ops: StringNormalizer (strings in, strings out) and TfIdfVectorizer (strings
// or integers in, n-gram counts out). Both are HostOnly: their values live in host
// memory, and their output extents depend on the input values (StringNormalizer) or on
// the attributes only (TfIdfVectorizer).

// StringNormalizerAttrs as in ONNX. CaseChangeAction is "NONE", "LOWER" or "UPPER".
type StringNormalizerAttrs struct {
	CaseChangeAction string   `attr:"case_change_action" default:"NONE"`
	IsCaseSensitive  int64    `attr:"is_case_sensitive"`
	Locale           string   `attr:"locale"`
	Stopwords        []string `attr:"stopwords"`
}

// TfIdfVectorizerAttrs as in ONNX. Mode is "TF", "IDF" or "TFIDF"; the pool is
// PoolInt64s or PoolStrings, NgramCounts[k] the pool offset of the (k+1)-grams.
type TfIdfVectorizerAttrs struct {
	MaxGramLength int64     `attr:"max_gram_length" required:"true" min:"1"`
	MinGramLength int64     `attr:"min_gram_length" required:"true" min:"1"`
	MaxSkipCount  int64     `attr:"max_skip_count" required:"true" min:"0"`
	Mode          string    `attr:"mode" required:"true"`
	NgramCounts   []int64   `attr:"ngram_counts" required:"true" min:"0"`
	NgramIndexes  []int64   `attr:"ngram_indexes" required:"true" min:"0"`
	PoolInt64s    []int64   `attr:"pool_int64s"`
	PoolStrings   []string  `attr:"pool_strings"`
	Weights       []float32 `attr:"weights"`
}

func stringOps() []OpInfo {
	return []OpInfo{
		{Op: OpStringNormalizer, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[StringNormalizerAttrs](), Pattern: Opaque, Flags: HostOnly | DataDependent, Infer: inferStringNormalizer},
		{Op: OpTfIdfVectorizer, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[TfIdfVectorizerAttrs](), Pattern: Opaque, Flags: HostOnly, Infer: inferTfIdf},
	}
}

func inferStringNormalizer(ic *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if x.DType != tensor.String {
		return nil, Inferf(n, "input is %v, want strings", x)
	}
	if a := n.Attrs.(*StringNormalizerAttrs); a.CaseChangeAction != "NONE" && a.CaseChangeAction != "LOWER" && a.CaseChangeAction != "UPPER" {
		return nil, Inferf(n, "case_change_action %q, want NONE, LOWER or UPPER", a.CaseChangeAction)
	}
	if x.UnknownRank {
		return []Type{x}, nil
	}
	switch len(x.Shape) {
	case 1:
		return []Type{TensorType(tensor.String, ic.Fresh())}, nil
	case 2:
		if v, ok := x.Shape[0].Value(); !ok || v != 1 {
			return nil, Inferf(n, "input is %v, want [C] or [1, C]", x)
		}
		return []Type{TensorType(tensor.String, Const(1), ic.Fresh())}, nil
	}
	return nil, Inferf(n, "input is %v, want [C] or [1, C]", x)
}

// TfIdfWidth is the output's last extent: the largest n-gram index plus one.
func TfIdfWidth(a *TfIdfVectorizerAttrs) int64 {
	w := int64(0)
	for _, i := range a.NgramIndexes {
		w = max(w, i+1)
	}
	return w
}

func inferTfIdf(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	a := n.Attrs.(*TfIdfVectorizerAttrs)
	switch {
	case a.Mode != "TF" && a.Mode != "IDF" && a.Mode != "TFIDF":
		return nil, Inferf(n, "mode %q, want TF, IDF or TFIDF", a.Mode)
	case a.MinGramLength > a.MaxGramLength || a.MaxGramLength > int64(len(a.NgramCounts)):
		return nil, Inferf(n, "gram lengths %d..%d with %d ngram_counts", a.MinGramLength, a.MaxGramLength, len(a.NgramCounts))
	case a.Weights != nil && len(a.Weights) != len(a.NgramIndexes):
		return nil, Inferf(n, "%d weights for %d ngram_indexes", len(a.Weights), len(a.NgramIndexes))
	case x.DType == tensor.String && a.PoolStrings == nil, (x.DType == tensor.Int32 || x.DType == tensor.Int64) && a.PoolInt64s == nil:
		return nil, Inferf(n, "input is %v and the pool of that kind is absent", x)
	case x.DType != tensor.String && x.DType != tensor.Int32 && x.DType != tensor.Int64:
		return nil, Inferf(n, "input is %v, want strings, int32 or int64", x)
	}
	w := Const(TfIdfWidth(a))
	if x.UnknownRank {
		return []Type{{Kind: KindTensor, DType: tensor.Float32, UnknownRank: true}}, nil
	}
	switch len(x.Shape) {
	case 1:
		return []Type{TensorType(tensor.Float32, w)}, nil
	case 2:
		return []Type{TensorType(tensor.Float32, x.Shape[0], w)}, nil
	}
	return nil, Inferf(n, "input is %v, want [C] or [N, C]", x)
}
