package vm

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func ints(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

func f32s(v ...float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

func scalar(v int64) *tensor.Tensor { return tensor.Scalar(v) }

// hostShapeCase is one call of a host shape function: the extents it yields, or (want
// nil) an ErrInput refusal.
type hostShapeCase struct {
	why  string
	f    Builtin
	args []*tensor.Tensor
	want []int64
}

func hostShapeCases() []hostShapeCase {
	big := int64(1) << 40
	return []hostShapeCase{
		{"reshape with 0 and -1", shapeReshape, []*tensor.Tensor{ints(2, 3, 4), ints(0, -1), scalar(0)}, []int64{2, 12}},
		{"reshape allowzero keeps a 0", shapeReshape, []*tensor.Tensor{ints(0, 3), ints(3, 0), scalar(1)}, []int64{3, 0}},
		{"reshape of another element count", shapeReshape, []*tensor.Tensor{ints(2, 3), ints(4, 2), scalar(0)}, nil},
		{"reshape with two -1", shapeReshape, []*tensor.Tensor{ints(2, 3), ints(-1, -1), scalar(0)}, nil},
		{"reshape with a negative extent", shapeReshape, []*tensor.Tensor{ints(2, 3), ints(-2, -3), scalar(0)}, nil},
		{"reshape whose -1 divides nothing", shapeReshape, []*tensor.Tensor{ints(2, 3), ints(4, -1), scalar(0)}, nil},
		{"reshape with -1 beside a 0 extent", shapeReshape, []*tensor.Tensor{ints(0, 3), ints(0, -1), scalar(1)}, nil},
		{"reshape with a 0 past the input's rank", shapeReshape, []*tensor.Tensor{ints(6), ints(6, 0), scalar(0)}, nil},
		{"reshape whose extents overflow", shapeReshape, []*tensor.Tensor{ints(6), ints(big, big, big, -1), scalar(0)}, nil},
		{"reshape past the rank limit", shapeReshape, []*tensor.Tensor{ints(1), ints(make([]int64, maxHostRank+1)...), scalar(1)}, nil},
		{"squeeze axes", shapeSqueeze, []*tensor.Tensor{ints(1, 3, 1, 2), ints(0, -2)}, []int64{3, 2}},
		{"squeeze every 1", shapeSqueeze, []*tensor.Tensor{ints(1, 3, 1)}, []int64{3}},
		{"squeeze of an extent other than 1", shapeSqueeze, []*tensor.Tensor{ints(2, 3), ints(0)}, nil},
		{"squeeze of an axis out of range", shapeSqueeze, []*tensor.Tensor{ints(1, 3), ints(2)}, nil},
		{"squeeze of a repeated axis", shapeSqueeze, []*tensor.Tensor{ints(1, 3), ints(0, -2)}, nil},
		{"unsqueeze", shapeUnsqueeze, []*tensor.Tensor{ints(3, 4), ints(-1, 0)}, []int64{1, 3, 4, 1}},
		{"unsqueeze of an axis out of range", shapeUnsqueeze, []*tensor.Tensor{ints(3), ints(2)}, nil},
		{"unsqueeze of a repeated axis", shapeUnsqueeze, []*tensor.Tensor{ints(3), ints(0, -3)}, nil},
		{"broadcast", shapeBroadcast, []*tensor.Tensor{ints(3, 1), ints(2, 1, 4)}, []int64{2, 3, 4}},
		{"broadcast to 0", shapeBroadcast, []*tensor.Tensor{ints(1), ints(0)}, []int64{0}},
		{"broadcast of unequal extents", shapeBroadcast, []*tensor.Tensor{ints(3), ints(4)}, nil},
		{"broadcast to a negative extent", shapeBroadcast, []*tensor.Tensor{ints(1), ints(-5)}, nil},
		{"tile", shapeTile, []*tensor.Tensor{ints(2, 3), ints(3, 0)}, []int64{6, 0}},
		{"tile by a negative repeat", shapeTile, []*tensor.Tensor{ints(2, 3), ints(-1, 1)}, nil},
		{"tile of another rank", shapeTile, []*tensor.Tensor{ints(2, 3), ints(2)}, nil},
		{"tile whose product overflows", shapeTile, []*tensor.Tensor{ints(big, 3), ints(math.MaxInt64, 1)}, nil},
		{"tile past the extent bound", shapeTile, []*tensor.Tensor{ints(big, 3), ints(2, 1)}, nil},
		{"shape values", shapeValues, []*tensor.Tensor{ints(2, 0, 3)}, []int64{2, 0, 3}},
		{"shape values of a scalar", shapeValues, []*tensor.Tensor{scalar(5)}, []int64{5}},
		{"shape values with a negative extent", shapeValues, []*tensor.Tensor{ints(2, -1)}, nil},
		{"shape values of too many elements", shapeValues, []*tensor.Tensor{ints(big, big, big)}, nil},
		{"int range", shapeRange, []*tensor.Tensor{scalar(10), scalar(1), scalar(-3)}, []int64{3}},
		{"empty int range", shapeRange, []*tensor.Tensor{scalar(1), scalar(10), scalar(-3)}, []int64{0}},
		{"float range", shapeRange, []*tensor.Tensor{tensor.Scalar(float32(1)), tensor.Scalar(float32(5)), tensor.Scalar(float32(2))}, []int64{2}},
		{"range by 0", shapeRange, []*tensor.Tensor{scalar(0), scalar(5), scalar(0)}, nil},
		{"float range by 0", shapeRange, []*tensor.Tensor{tensor.Scalar(0.0), tensor.Scalar(5.0), tensor.Scalar(0.0)}, nil},
		{"float range of NaN", shapeRange, []*tensor.Tensor{tensor.Scalar(math.NaN()), tensor.Scalar(5.0), tensor.Scalar(1.0)}, nil},
		{"range past the extent bound", shapeRange, []*tensor.Tensor{scalar(0), scalar(math.MaxInt64), scalar(1)}, nil},
		{"range whose span overflows", shapeRange, []*tensor.Tensor{scalar(math.MinInt64), scalar(math.MaxInt64), scalar(math.MaxInt64)}, nil},
		{"slice", shapeSlice, []*tensor.Tensor{ints(10, 5), ints(1, -100), ints(-1, 100), ints(0, 1), ints(2, 1)}, []int64{4, 5}},
		{"slice backwards", shapeSlice, []*tensor.Tensor{ints(10), ints(-1), ints(math.MinInt64), ints(0), ints(-3)}, []int64{4}},
		{"slice with default axes", shapeSlice, []*tensor.Tensor{ints(10, 5), ints(2), ints(4)}, []int64{2, 5}},
		{"slice by step 0", shapeSlice, []*tensor.Tensor{ints(10), ints(0), ints(5), ints(0), ints(0)}, nil},
		{"slice of an axis out of range", shapeSlice, []*tensor.Tensor{ints(10), ints(0), ints(5), ints(1)}, nil},
		{"slice with operands of other lengths", shapeSlice, []*tensor.Tensor{ints(10, 5), ints(0, 1), ints(5)}, nil},
		{"pad", shapePad, []*tensor.Tensor{ints(2, 3), ints(1, 0, 2, -1)}, []int64{5, 2}},
		{"pad of some axes", shapePad, []*tensor.Tensor{ints(2, 3), ints(1, 1), ints(-1)}, []int64{2, 5}},
		{"pad cropping past the axis", shapePad, []*tensor.Tensor{ints(2, 3), ints(-2, 0, -1, 0)}, nil},
		{"pad of the wrong count", shapePad, []*tensor.Tensor{ints(2, 3), ints(1, 1)}, nil},
		{"pad past the extent bound", shapePad, []*tensor.Tensor{ints(2), ints(math.MaxInt64, 1)}, nil},
		{"split", shapeSplit, []*tensor.Tensor{ints(3, 5), scalar(1), ints(2, 0, 3), scalar(3)}, []int64{2, 0, 3}},
		{"split sizes of another sum", shapeSplit, []*tensor.Tensor{ints(3, 5), scalar(1), ints(2, 2), scalar(2)}, nil},
		{"split with a negative size", shapeSplit, []*tensor.Tensor{ints(3, 5), scalar(1), ints(6, -1), scalar(2)}, nil},
		{"split sizes of another count than the outputs", shapeSplit, []*tensor.Tensor{ints(3, 5), scalar(1), ints(2, 3), scalar(3)}, nil},
		{"onehot depth", shapeOneHot, []*tensor.Tensor{tensor.Scalar(float32(4.7))}, []int64{4}},
		{"onehot depth 0", shapeOneHot, []*tensor.Tensor{scalar(0)}, nil},
		{"onehot depth past the bound", shapeOneHot, []*tensor.Tensor{tensor.Scalar(1e300)}, nil},
		{"reduce keeping dims", shapeReduce, []*tensor.Tensor{ints(2, 3, 4), ints(-1, 0), scalar(1), scalar(0)}, []int64{1, 3, 1}},
		{"reduce dropping dims", shapeReduce, []*tensor.Tensor{ints(2, 3, 4), ints(1), scalar(0), scalar(0)}, []int64{2, 4}},
		{"reduce over every axis", shapeReduce, []*tensor.Tensor{ints(2, 3), ints(), scalar(0), scalar(0)}, []int64{}},
		{"reduce over no axis", shapeReduce, []*tensor.Tensor{ints(2, 3), ints(), scalar(0), scalar(1)}, []int64{2, 3}},
		{"reduce over a repeated axis", shapeReduce, []*tensor.Tensor{ints(2, 3), ints(0, -2), scalar(1), scalar(0)}, nil},
		{"reduce over an axis out of range", shapeReduce, []*tensor.Tensor{ints(2, 3), ints(2), scalar(1), scalar(0)}, nil},
		{"resize by scales", shapeResize, []*tensor.Tensor{ints(1, 2, 5, 6), ints(2, 3), scalar(ResizeStretch), scalar(0), f32s(1.7, 0.35)}, []int64{1, 2, 8, 2}},
		{"resize to sizes", shapeResize, []*tensor.Tensor{ints(1, 2, 5, 6), ints(-1, 2), scalar(ResizeStretch), scalar(1), ints(9, 3)}, []int64{1, 2, 3, 9}},
		{"resize to sizes not larger", shapeResize, []*tensor.Tensor{ints(1, 2, 6, 8), ints(2, 3), scalar(ResizeNotLarger), scalar(1), ints(4, 11)}, []int64{1, 2, 4, 5}},
		{"resize to sizes not smaller", shapeResize, []*tensor.Tensor{ints(1, 2, 6, 8), ints(2, 3), scalar(ResizeNotSmaller), scalar(1), ints(4, 11)}, []int64{1, 2, 8, 11}},
		{"resize by a zero scale", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(0), f32s(0, 2)}, nil},
		{"resize by a negative scale", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(0), f32s(1, -2)}, nil},
		{"resize by a NaN scale", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(0), f32s(float32(math.NaN()), 2)}, nil},
		{"resize by an infinite scale", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(0), f32s(float32(math.Inf(1)), 2)}, nil},
		{"resize by a scale past the limits", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(0), f32s(1e30, 2)}, nil},
		{"resize to a negative size", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(1), ints(-1, 2)}, nil},
		{"resize to a size past the limits", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(1), ints(1<<41, 2)}, nil},
		{"resize with sizes not one per axis", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 1), scalar(0), scalar(1), ints(2)}, nil},
		{"resize over an axis out of range", shapeResize, []*tensor.Tensor{ints(5, 6), ints(0, 2), scalar(0), scalar(1), ints(2, 2)}, nil},
		{"resize of an empty axis to more", shapeResize, []*tensor.Tensor{ints(0, 6), ints(0, 1), scalar(0), scalar(1), ints(2, 2)}, nil},
	}
}

// TestHostShapeFunctions: each host shape function yields ONNX's output extents, and
// refuses a value a request can get wrong (negative, overflowing, of the wrong element
// count, past the rank or extent limits) with ErrInput, never a panic.
func TestHostShapeFunctions(t *testing.T) {
	for _, c := range hostShapeCases() {
		got, err := c.f(c.args)
		if c.want == nil {
			if !errors.Is(err, ErrInput) {
				t.Errorf("%s: got %v, %v; want an ErrInput refusal", c.why, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		if got.DType != tensor.Int64 || len(got.Shape) != 1 || !slices.Equal(got.Int64s(), c.want) {
			t.Errorf("%s: got %v%v %v, want %v", c.why, got.DType, got.Shape, got.Int64s(), c.want)
		}
	}
}

// TestHostShapeFunctionsMalformed: a malformed call (what only a corrupt executable
// makes: missing arguments, a float shape, a matrix) is an error, never a panic.
func TestHostShapeFunctionsMalformed(t *testing.T) {
	for name, f := range hostShapeBuiltins() {
		for _, args := range [][]*tensor.Tensor{
			nil,
			{nil, nil, nil, nil},
			{tensor.Scalar(float32(1)), ints(1), ints(1), ints(1)},
			{tensor.New(tensor.Int64, tensor.Shape{2, 2}), ints(1), scalar(0), scalar(0)},
			{ints(1), ints(1), ints(1), ints(1), ints(1), ints(1)},
		} {
			if _, err := f(args); err == nil {
				t.Errorf("%s(%v): no error", name, args)
			}
		}
	}
}

// TestStdBuiltinsHaveHostShapeFunctions: the table a VM loads holds every one.
func TestStdBuiltinsHaveHostShapeFunctions(t *testing.T) {
	std := StdBuiltins()
	for name := range hostShapeBuiltins() {
		if std[name] == nil {
			t.Errorf("StdBuiltins lacks %s", name)
		}
	}
}
