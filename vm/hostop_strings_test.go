package vm_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// runText runs the standard host op op on in with attrs, within lim.
func runText(t *testing.T, op string, attrs vm.HostAttrs, lim vm.Limits, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	t.Helper()
	args := make([]vm.Reg, len(in))
	for i := range args {
		args[i] = vm.Reg(i)
	}
	n := vm.Reg(len(in))
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: len(in), Regs: int(n) + 2, Code: []vm.Instr{
			{Op: vm.CallHost, Dst: n, Args: args, Imm: 0, Str: "node " + op + "_1"},
			{Op: vm.GetField, Dst: n + 1, Args: []vm.Reg{n}, Imm: 0},
			{Op: vm.Ret, Args: []vm.Reg{n + 1}},
		}}},
		HostCalls: []vm.HostCall{{Op: op, Attrs: vm.SortAttrs(attrs)}},
	}
	m, err := vm.LoadWith(roundTrip(t, exe), []devices.Device{openCPU(t)}, nil, vm.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Run(context.Background(), in)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func strs(s ...string) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(s)}, s) }

func castTo(dt tensor.DType) vm.HostAttrs {
	return vm.HostAttrs{{Name: "to", Kind: vm.AttrInts, Ints: []int64{int64(dt)}}}
}

func TestStringNormalizerRefusesInvalidUTF8(t *testing.T) {
	attrs := vm.HostAttrs{{Name: "case_change_action", Kind: vm.AttrStrings, Strings: []string{"UPPER"}}}
	_, err := runText(t, vm.HostStringNormalizer, attrs, vm.Limits{}, strs("fine", "bad\xff\xfe"))
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("got %v, want an ErrInput naming UTF-8", err)
	}
	out, err := runText(t, vm.HostStringNormalizer, attrs, vm.Limits{}, strs("résumé", "monday"))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Data.([]string); got[0] != "RÉSUMÉ" || got[1] != "MONDAY" {
		t.Fatalf("upper case: %q", got)
	}
}

func TestStringOutputsCountAgainstTheCallsLimits(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	lim := vm.Limits{TensorBytes: 1 << 22, RequestBytes: 3 << 20}
	attrs := vm.HostAttrs{{Name: "case_change_action", Kind: vm.AttrStrings, Strings: []string{"UPPER"}}}
	// the input holds 2 MiB, the upper-cased output 2 MiB more: over the call's 3 MiB
	_, err := runText(t, vm.HostStringNormalizer, attrs, lim, strs(huge, huge))
	if !errors.Is(err, vm.ErrInput) || !errors.Is(err, vm.ErrMemoryLimit) {
		t.Fatalf("got %v, want ErrInput and ErrMemoryLimit", err)
	}
	if _, err := runText(t, vm.HostStringNormalizer, attrs, lim, strs(huge)); err != nil {
		t.Fatalf("within the limits: %v", err)
	}
}

func TestCastFromTextFollowsONNXAndRefusesNonNumbers(t *testing.T) {
	out, err := runText(t, vm.HostCastString, castTo(tensor.Float32), vm.Limits{}, strs("1.5", "-1e-5", "1E8", "inf", "+INF", "-Inf", "NaN", "1e400", " 2 "))
	if err != nil {
		t.Fatal(err)
	}
	f := out.Data.([]float32)
	want := []float32{1.5, -1e-5, 1e8, float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Inf(1)), 2}
	for i, w := range want {
		if i == 6 {
			if !math.IsNaN(float64(f[i])) {
				t.Errorf("NaN read as %v", f[i])
			}
			continue
		}
		if f[i] != w {
			t.Errorf("element %d: got %v want %v", i, f[i], w)
		}
	}
	out, err = runText(t, vm.HostCastString, castTo(tensor.Int64), vm.Limits{}, strs("9007199254740993", "100.5", "-7"))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Data.([]int64); got[0] != 9007199254740993 || got[1] != 100 || got[2] != -7 {
		t.Fatalf("int64: %v", got)
	}
	for _, bad := range []struct {
		to tensor.DType
		s  string
	}{{tensor.Float32, "Hello World!"}, {tensor.Float32, ""}, {tensor.Float32, "0x1p3"}, {tensor.Float64, "1_000"},
		{tensor.Int32, "NaN"}, {tensor.Int64, "1e30"}, {tensor.Int8, strings.Repeat("9", 1<<16) + "z"}} {
		_, err := runText(t, vm.HostCastString, castTo(bad.to), vm.Limits{}, strs(bad.s))
		if !errors.Is(err, vm.ErrInput) {
			t.Errorf("%q to %v: got %v, want ErrInput", bad.s[:min(len(bad.s), 12)], bad.to, err)
		} else if len(err.Error()) > 400 {
			t.Errorf("%v: the error quotes the whole string (%d bytes)", bad.to, len(err.Error()))
		}
	}
}

func TestCastToTextPrintsLikeONNX(t *testing.T) {
	x := tensor.MustFromSlice(tensor.Shape{5}, []float32{0.47892547, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3})
	out, err := runText(t, vm.HostCastString, castTo(tensor.String), vm.Limits{}, x)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0.47892547", "INF", "-INF", "NaN", "3"}
	if got := out.Data.([]string); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestTfIdfRefusesAnInputOfThePoolsOtherKind(t *testing.T) {
	attrs := vm.HostAttrs{
		{Name: "max_gram_length", Kind: vm.AttrInts, Ints: []int64{1}},
		{Name: "min_gram_length", Kind: vm.AttrInts, Ints: []int64{1}},
		{Name: "max_skip_count", Kind: vm.AttrInts, Ints: []int64{0}},
		{Name: "mode", Kind: vm.AttrStrings, Strings: []string{"TF"}},
		{Name: "ngram_counts", Kind: vm.AttrInts, Ints: []int64{0}},
		{Name: "ngram_indexes", Kind: vm.AttrInts, Ints: []int64{0, 1}},
		{Name: "pool_int64s", Kind: vm.AttrInts, Ints: []int64{2, 3}},
	}
	if _, err := runText(t, vm.HostTfIdfVectorizer, attrs, vm.Limits{}, strs("2", "3")); !errors.Is(err, vm.ErrInput) {
		t.Fatalf("strings against an integer pool: %v", err)
	}
	out, err := runText(t, vm.HostTfIdfVectorizer, attrs, vm.Limits{}, tensor.MustFromSlice(tensor.Shape{3}, []int64{3, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Data.([]float32); got[0] != 1 || got[1] != 2 {
		t.Fatalf("counts %v, want [1 2]", got)
	}
}

func TestTfIdfWithAHugeSkipCountEndsAtTheRowsLength(t *testing.T) {
	attrs := vm.HostAttrs{
		{Name: "max_gram_length", Kind: vm.AttrInts, Ints: []int64{2}},
		{Name: "min_gram_length", Kind: vm.AttrInts, Ints: []int64{2}},
		{Name: "max_skip_count", Kind: vm.AttrInts, Ints: []int64{1 << 62}},
		{Name: "mode", Kind: vm.AttrStrings, Strings: []string{"TF"}},
		{Name: "ngram_counts", Kind: vm.AttrInts, Ints: []int64{0, 0}},
		{Name: "ngram_indexes", Kind: vm.AttrInts, Ints: []int64{0}},
		{Name: "pool_int64s", Kind: vm.AttrInts, Ints: []int64{2, 3}},
	}
	out, err := runText(t, vm.HostTfIdfVectorizer, attrs, vm.Limits{}, tensor.MustFromSlice(tensor.Shape{4}, []int64{2, 2, 3, 3}))
	if err != nil {
		t.Fatal(err)
	}
	// (2,3) at skips 0 (positions 1,2), 1 (0,2; 1,3) and 2 (0,3)
	if got := out.Data.([]float32); got[0] != 4 {
		t.Fatalf("count %v, want 4", got)
	}
}
