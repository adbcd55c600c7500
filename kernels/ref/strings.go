package ref

// StringNormalizer and TfIdfVectorizer.

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func stringKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpStringNormalizer: T(stringNormalizer),
		graph.OpTfIdfVectorizer:  T(tfIdfVectorizer),
	}
}

// stringNormalizer drops the stop words (compared case-insensitively unless
// is_case_sensitive), then changes the case of what is left. An input that is not valid
// UTF-8 is refused: case mapping and case-insensitive comparison are defined on text.
// When every string is dropped the output is one empty string.
func stringNormalizer(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.StringNormalizerAttrs](n)
	x := in[0]
	xs, ok := x.Data.([]string)
	if !ok {
		return nil, Badf("input is %v, want strings", x.DType)
	}
	if len(x.Shape) != 1 && (len(x.Shape) != 2 || x.Shape[0] != 1) {
		return nil, Badf("input shape %v, want [C] or [1, C]", x.Shape)
	}
	fold := func(s string) string {
		if a.IsCaseSensitive != 0 {
			return s
		}
		return strings.ToLower(s)
	}
	stop := map[string]bool{}
	for _, w := range a.Stopwords {
		if !utf8.ValidString(w) {
			return nil, Badf("a stop word is not valid UTF-8")
		}
		stop[fold(w)] = true
	}
	var out []string
	for i, s := range xs {
		if !utf8.ValidString(s) {
			return nil, Badf("string %d is not valid UTF-8", i)
		}
		if stop[fold(s)] {
			continue
		}
		switch a.CaseChangeAction {
		case "LOWER":
			s = strings.ToLower(s)
		case "UPPER":
			s = strings.ToUpper(s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		out = []string{""}
	}
	shape := tensor.Shape{len(out)}
	if len(x.Shape) == 2 {
		shape = tensor.Shape{1, len(out)}
	}
	return []*tensor.Tensor{tensor.MustFromSlice(shape, out)}, nil
}

// tfIdfVectorizer counts, in each row, the pool's n-grams of lengths min..max whose items
// are skip+1 apart (skip 0..max_skip_count; a 1-gram is counted once), then applies the
// mode: TF the count, IDF the weight (1 without weights) where the count is positive,
// TFIDF the count times the weight.
func tfIdfVectorizer(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.TfIdfVectorizerAttrs](n)
	x := in[0]
	var tokens []string
	var pool []string
	switch d := x.Data.(type) {
	case []string:
		tokens, pool = d, a.PoolStrings
	case []int32, []int64:
		for _, v := range x.Int64s() {
			tokens = append(tokens, itoa(v))
		}
		for _, v := range a.PoolInt64s {
			pool = append(pool, itoa(v))
		}
	default:
		return nil, Badf("input is %v, want strings or integers", x.DType)
	}
	if len(x.Shape) != 1 && len(x.Shape) != 2 {
		return nil, Badf("input shape %v, want [C] or [N, C]", x.Shape)
	}
	// ngrams maps an n-gram (items joined by \x00 after their length) to its output column
	ngrams := map[string]int{}
	k := 0
	for g := range a.NgramCounts {
		start, end := int(a.NgramCounts[g]), len(pool)
		if g+1 < len(a.NgramCounts) {
			end = int(a.NgramCounts[g+1])
		}
		size := g + 1
		if start > end || end > len(pool) || (end-start)%size != 0 {
			return nil, Badf("ngram_counts %v do not split a pool of %d items", a.NgramCounts, len(pool))
		}
		for p := start; p < end; p += size {
			if k >= len(a.NgramIndexes) {
				return nil, Badf("%d ngram_indexes for more n-grams", len(a.NgramIndexes))
			}
			ngrams[ngramKey(pool[p:p+size])] = k
			k++
		}
	}
	width := int(graph.TfIdfWidth(a))
	rows, cols := 1, x.Shape[0]
	if len(x.Shape) == 2 {
		rows, cols = x.Shape[0], x.Shape[1]
	}
	out := make([]float32, rows*width)
	for r := 0; r < rows; r++ {
		row := tokens[r*cols : (r+1)*cols]
		counts := make([]float32, width)
		for size := int(a.MinGramLength); size <= int(a.MaxGramLength); size++ {
			for skip := 0; int64(skip) <= min(a.MaxSkipCount, int64(len(row))); skip++ { // a larger skip fits no n-gram
				if size == 1 && skip > 0 {
					break
				}
				step := skip + 1
				for s := 0; s+(size-1)*step < len(row); s++ {
					items := make([]string, size)
					for j := range items {
						items[j] = row[s+j*step]
					}
					if id, ok := ngrams[ngramKey(items)]; ok {
						counts[a.NgramIndexes[id]]++
					}
				}
			}
		}
		for id, col := range a.NgramIndexes {
			c := counts[col]
			w := float32(1)
			if a.Weights != nil {
				w = a.Weights[id]
			}
			switch a.Mode {
			case "TF":
				out[r*width+int(col)] = c
			case "IDF":
				if c > 0 {
					out[r*width+int(col)] = w
				}
			default:
				out[r*width+int(col)] = c * w
			}
		}
	}
	shape := tensor.Shape{width}
	if len(x.Shape) == 2 {
		shape = tensor.Shape{rows, width}
	}
	return []*tensor.Tensor{tensor.MustFromSlice(shape, out)}, nil
}

func ngramKey(items []string) string {
	var b strings.Builder
	for _, s := range items {
		b.WriteString(itoa(int64(len(s))))
		b.WriteByte(0)
		b.WriteString(s)
	}
	return b.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
