package vm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnrt/kiln/tensor"
)

// Host ops on text: StringNormalizer, TfIdfVectorizer and the casts to and from
// strings. A string tensor has no device layout (its elements are Go strings of any
// length), so these run on the host; TfIdfVectorizer runs there on integer inputs too
// (a hash of n-grams, not a loop nest). Text a request supplies is checked: a string
// that is not valid UTF-8 where case matters is an ErrInput, and the bytes of every
// output string are counted against the call's limits before they are made.

// Names of the text host ops.
const (
	HostStringNormalizer = "StringNormalizer"
	HostTfIdfVectorizer  = "TfIdfVectorizer"
	// HostCastString is Cast or CastLike where the source or the target is a string:
	// attribute "to" (a tensor.DType number) or, for CastLike, input 1's element type.
	HostCastString = "CastString"
)

// stringHostOps are the text host ops of StdHostOps.
func stringHostOps() HostOps {
	return HostOps{
		HostStringNormalizer: {Outputs: 1, Check: checkStringNormalizer, Run: hostStringNormalizer},
		HostTfIdfVectorizer:  {Outputs: 1, Check: checkTfIdf, Run: hostTfIdf},
		HostCastString:       {Outputs: 1, Run: hostCastString},
	}
}

// stringHeader is what a string costs besides its bytes (Go's string header).
const stringHeader = 16

// allocStrings counts out's strings against the call's limits and makes the tensor.
func allocStrings(h *HostCtx, shape tensor.Shape, out []string) (*tensor.Tensor, error) {
	n := int64(len(out)) * stringHeader
	for _, s := range out {
		n += int64(len(s))
	}
	if err := h.Reserve(n); err != nil {
		return nil, err
	}
	return tensor.FromSlice(shape, out)
}

func checkStringNormalizer(a HostAttrs) error {
	switch c := a.Strings("case_change_action"); {
	case len(c) != 1 || (c[0] != "NONE" && c[0] != "LOWER" && c[0] != "UPPER"):
		return fmt.Errorf("case_change_action %q, want NONE, LOWER or UPPER", c)
	}
	return nil
}

// hostStringNormalizer drops the stop words (case-insensitively unless
// is_case_sensitive), then changes the case of the rest; when none is left the output
// is one empty string. Input text that is not valid UTF-8 is an ErrInput.
func hostStringNormalizer(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	xs, ok := x.Data.([]string)
	if !ok || (len(x.Shape) != 1 && (len(x.Shape) != 2 || x.Shape[0] != 1)) {
		return nil, fmt.Errorf("%w: input is %v%v, want strings of shape [C] or [1, C]", ErrInput, x.DType, x.Shape)
	}
	sensitive := a.Int("is_case_sensitive", 0) != 0
	fold := func(s string) string {
		if sensitive {
			return s
		}
		return strings.ToLower(s)
	}
	stop := map[string]bool{}
	for _, w := range a.Strings("stopwords") {
		stop[fold(w)] = true
	}
	action := "NONE"
	if c := a.Strings("case_change_action"); len(c) == 1 {
		action = c[0]
	}
	var out []string
	for i, s := range xs {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w: string %d is not valid UTF-8", ErrInput, i)
		}
		if stop[fold(s)] {
			continue
		}
		switch action {
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
	t, err := allocStrings(h, shape, out)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{t}, nil
}

// tfIdfTable is TfIdfVectorizer's pool as a map from an n-gram's key to its position
// in ngram_indexes, with the output width.
type tfIdfTable struct {
	ids   map[string]int
	width int
}

func checkTfIdf(a HostAttrs) error {
	_, err := newTfIdfTable(a)
	return err
}

// newTfIdfTable reads the pool (pool_strings, else pool_int64s in decimal) split by
// ngram_counts into 1-grams, 2-grams, ...
func newTfIdfTable(a HostAttrs) (*tfIdfTable, error) {
	pool := a.Strings("pool_strings")
	if pool == nil {
		for _, v := range a.Ints("pool_int64s") {
			pool = append(pool, strconv.FormatInt(v, 10))
		}
	}
	counts, idx := a.Ints("ngram_counts"), a.Ints("ngram_indexes")
	t := &tfIdfTable{ids: map[string]int{}}
	for _, i := range idx {
		if i < 0 || i >= 1<<31 {
			return nil, fmt.Errorf("ngram index %d out of range", i)
		}
		t.width = max(t.width, int(i)+1)
	}
	k := 0
	for g := range counts {
		start, end := counts[g], int64(len(pool))
		if g+1 < len(counts) {
			end = counts[g+1]
		}
		size := int64(g + 1)
		if start < 0 || start > end || end > int64(len(pool)) || (end-start)%size != 0 {
			return nil, fmt.Errorf("ngram_counts %v do not split a pool of %d items", counts, len(pool))
		}
		for p := start; p < end; p += size {
			if k >= len(idx) {
				return nil, fmt.Errorf("%d ngram_indexes for more n-grams", len(idx))
			}
			t.ids[ngramKey(pool[p:p+size])] = k
			k++
		}
	}
	if w := a.Floats("weights"); w != nil && len(w) != len(idx) {
		return nil, fmt.Errorf("%d weights for %d ngram_indexes", len(w), len(idx))
	}
	if lo, hi := a.Int("min_gram_length", 0), a.Int("max_gram_length", 0); lo < 1 || lo > hi || hi > int64(len(counts)) {
		return nil, fmt.Errorf("gram lengths %d..%d with %d ngram_counts", lo, hi, len(counts))
	}
	if s := a.Int("max_skip_count", 0); s < 0 {
		return nil, fmt.Errorf("max_skip_count %d", s)
	}
	return t, nil
}

// ngramKey joins an n-gram's items, each after its length, so no two n-grams share a key.
func ngramKey(items []string) string {
	var b strings.Builder
	for _, s := range items {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

// hostTfIdf counts in each row the pool's n-grams of lengths min..max whose items are
// skip+1 apart (skip 0..max_skip_count; a 1-gram counts once), then applies the mode:
// TF the count, IDF the weight (1 without weights) where the count is positive, TFIDF
// the count times the weight.
func hostTfIdf(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	tab, err := newTfIdfTable(a)
	if err != nil {
		return nil, fmt.Errorf("BUG: attributes passed Check: %w", err)
	}
	var tokens []string
	switch d := x.Data.(type) {
	case []string:
		if a.Strings("pool_strings") == nil {
			return nil, fmt.Errorf("%w: string input with an integer pool", ErrInput)
		}
		tokens = d
	case []int32, []int64:
		if a.Strings("pool_strings") != nil {
			return nil, fmt.Errorf("%w: integer input with a string pool", ErrInput)
		}
		if err := h.Reserve(int64(x.Len()) * (stringHeader + 20)); err != nil {
			return nil, err
		}
		for _, v := range x.Int64s() {
			tokens = append(tokens, strconv.FormatInt(v, 10))
		}
	default:
		return nil, fmt.Errorf("%w: input is %v, want strings or integers", ErrInput, x.DType)
	}
	rows, cols := 1, 0
	switch len(x.Shape) {
	case 1:
		cols = x.Shape[0]
	case 2:
		rows, cols = x.Shape[0], x.Shape[1]
	default:
		return nil, fmt.Errorf("%w: input shape %v, want [C] or [N, C]", ErrInput, x.Shape)
	}
	shape := []int64{int64(tab.width)}
	if len(x.Shape) == 2 {
		shape = []int64{int64(rows), int64(tab.width)}
	}
	y, err := h.Alloc(tensor.Float32, shape...)
	if err != nil {
		return nil, err
	}
	out := y.Data.([]float32)
	idx, weights, mode := a.Ints("ngram_indexes"), a.Floats("weights"), a.Strings("mode")
	lo, hi, maxSkip := int(a.Int("min_gram_length", 1)), int(a.Int("max_gram_length", 1)), a.Int("max_skip_count", 0)
	counts := make([]float32, tab.width)
	items := make([]string, hi)
	for r := 0; r < rows; r++ {
		row := tokens[r*cols : (r+1)*cols]
		clear(counts)
		for size := lo; size <= hi; size++ {
			// a skip of len(row) or more fits no n-gram of two items or more
			for skip := 0; int64(skip) <= min(maxSkip, int64(len(row))) && (size > 1 || skip == 0); skip++ {
				step := skip + 1
				for s := 0; s+(size-1)*step < len(row); s++ {
					for j := 0; j < size; j++ {
						items[j] = row[s+j*step]
					}
					if id, ok := tab.ids[ngramKey(items[:size])]; ok {
						counts[idx[id]]++
					}
				}
			}
		}
		for id, col := range idx {
			c, w := counts[col], float32(1)
			if weights != nil {
				w = float32(weights[id])
			}
			v := c * w
			if len(mode) == 1 && mode[0] == "TF" {
				v = c
			} else if len(mode) == 1 && mode[0] == "IDF" {
				v = 0
				if c > 0 {
					v = w
				}
			}
			out[r*tab.width+int(col)] = v
		}
	}
	return []*tensor.Tensor{y}, nil
}

// hostCastString casts to or from strings with ONNX's rules. Numbers print in the
// shortest form that reads back to the same value of their type ("INF", "-INF" and
// "NaN" for the special values, integers in decimal, bools as 0 and 1). Strings parse as
// decimal or scientific numbers; "INF", "+INF", "-INF", "INFINITY" and "NaN" in any case
// are the special values, and a number beyond float64's range the infinity of its sign;
// an integer target reads an integer literal exactly and truncates a decimal one. Text
// that is no number (ONNX leaves it undefined; its reference implementation refuses it)
// is an ErrInput, as is NaN, an infinity or a value out of range for an integer target.
func hostCastString(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	to := tensor.DType(a.Int("to", 0))
	if len(in) > 1 && in[1] != nil {
		to = in[1].DType
	}
	if !to.Valid() {
		return nil, fmt.Errorf("%w: cast to element type %d", ErrInput, to)
	}
	switch {
	case x.DType == tensor.String && to == tensor.String:
		out, err := allocStrings(h, x.Shape, append([]string(nil), x.Data.([]string)...))
		return []*tensor.Tensor{out}, err
	case to == tensor.String:
		out, err := allocStrings(h, x.Shape, FormatStrings(x))
		return []*tensor.Tensor{out}, err
	case x.DType == tensor.String:
		if _, err := h.Alloc(to, int64(x.Len())); err != nil {
			return nil, err
		}
		out, err := ParseStrings(x.Data.([]string), to, x.Shape)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		return []*tensor.Tensor{out}, nil
	}
	return nil, fmt.Errorf("%w: %v to %v involves no string", ErrInput, x.DType, to)
}

// FormatStrings prints each element of a numeric or bool tensor as ONNX's Cast does.
func FormatStrings(x *tensor.Tensor) []string {
	out := make([]string, x.Len())
	switch {
	case x.DType.IsFloat():
		bits := 32
		if x.DType == tensor.Float64 {
			bits = 64
		}
		for i, v := range x.Float64s() {
			switch {
			case math.IsInf(v, 1):
				out[i] = "INF"
			case math.IsInf(v, -1):
				out[i] = "-INF"
			case math.IsNaN(v):
				out[i] = "NaN"
			default:
				out[i] = strconv.FormatFloat(v, 'g', -1, bits)
			}
		}
	case x.DType == tensor.Uint64:
		for i, v := range x.Int64s() {
			out[i] = strconv.FormatUint(uint64(v), 10)
		}
	default:
		for i, v := range x.Int64s() {
			out[i] = strconv.FormatInt(v, 10)
		}
	}
	return out
}

// ParseStrings reads strings as numbers of type to (see hostCastString).
func ParseStrings(s []string, to tensor.DType, shape tensor.Shape) (*tensor.Tensor, error) {
	if to.IsFloat() {
		v := make([]float64, len(s))
		for i, str := range s {
			f, ok := parseFloat(str)
			if !ok {
				return nil, fmt.Errorf("string %d (%s) is not a number", i, quoteShort(str))
			}
			v[i] = f
		}
		return tensor.FromFloat64s(to, shape, v), nil
	}
	v := make([]int64, len(s))
	for i, str := range s {
		t := strings.TrimSpace(str)
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			v[i] = n
			continue
		}
		if n, err := strconv.ParseUint(t, 10, 64); err == nil && to == tensor.Uint64 {
			v[i] = int64(n)
			continue
		}
		f, ok := parseFloat(t)
		switch {
		case !ok || math.IsNaN(f) || math.IsInf(f, 0):
			return nil, fmt.Errorf("string %d (%s) is not a number of %v", i, quoteShort(str), to)
		case to == tensor.Bool:
			v[i] = 0
			if f != 0 {
				v[i] = 1
			}
		case f >= 9.223372036854775807e18 || f < -9.223372036854775808e18:
			return nil, fmt.Errorf("string %d (%s) is out of the range of %v", i, quoteShort(str), to)
		default:
			v[i] = int64(f)
		}
	}
	return tensor.FromInt64s(to, shape, v), nil
}

// parseFloat reads a decimal or scientific number, or a special value; ok is false for
// anything else. A number beyond float64's range is the infinity of its sign.
func parseFloat(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	switch strings.ToUpper(t) {
	case "INF", "+INF", "INFINITY", "+INFINITY":
		return math.Inf(1), true
	case "-INF", "-INFINITY":
		return math.Inf(-1), true
	case "NAN", "+NAN", "-NAN":
		return math.NaN(), true
	}
	if t == "" || strings.ContainsAny(t, "xXpP_nNiI") { // no hexadecimal floats, digit separators or other spellings
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// quoteShort quotes at most the first 32 bytes of s for an error message.
func quoteShort(s string) string {
	if len(s) > 32 {
		return strconv.Quote(s[:32]) + "..."
	}
	return strconv.Quote(s)
}

// Floats is the float list attribute name (nil when absent).
func (a HostAttrs) Floats(name string) []float64 {
	if at := a.find(name, AttrFloats); at != nil {
		return at.Floats
	}
	return nil
}

// stringBytes is what a string tensor holds: its bytes and one header per element.
func stringBytes(t *tensor.Tensor) int64 {
	s, _ := t.Data.([]string)
	n := int64(len(s)) * stringHeader
	for _, x := range s {
		n += int64(len(x))
	}
	return n
}
