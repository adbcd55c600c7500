package cpu

import (
	"errors"
	"fmt"
	"github.com/kilnrt/kiln/devices"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestTrainingBatchNormAgreesWithReference: BatchNormalization with training_mode=1
// normalizes with the batch's statistics and returns the running mean and variance,
// on inputs of rank 2 to 4, against the reference evaluator.
func TestTrainingBatchNormAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for i, shape := range [][]int{{5, 3}, {2, 4, 7}, {3, 2, 5, 6}} {
		c := shape[1]
		for _, outs := range []int{1, 3} {
			t.Run(fmt.Sprintf("%v %d outputs", shape, outs), func(t *testing.T) {
				a := &graph.BatchNormAttrs{Epsilon: 1e-3, Momentum: 0.8, TrainingMode: 1}
				nt.CheckNode(t, l, graph.OpBatchNormalization, a, outs, nt.In(f32(uint64(i+1), shape...)),
					nt.In(f32(11, c)), nt.In(f32(12, c)), nt.In(f32(13, c)), nt.In(positive(f32(14, c))))
			})
		}
	}
}

// TestLRNAgreesWithReference: LRN with odd and even window sizes, windows as wide as
// and wider than the channels (one of 2^30 taps, which must not loop over its size),
// and ranks 3 and 4, against the reference evaluator.
func TestLRNAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		shape []int
		size  int64
	}{{[]int{2, 7, 5, 4}, 5}, {[]int{2, 6, 9}, 4}, {[]int{1, 3, 4, 4}, 7}, {[]int{2, 5, 3, 3}, 1}, {[]int{1, 4, 3}, 4}, {[]int{1, 3, 2, 2}, 1 << 30}}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%v size %d", c.shape, c.size), func(t *testing.T) {
			a := &graph.LRNAttrs{Alpha: 0.02, Beta: 0.6, Bias: 1.5, Size: c.size}
			nt.CheckNode(t, l, graph.OpLRN, a, 1, nt.In(f32(uint64(20+i), c.shape...)))
		})
	}
}

// TestEinsumAgreesWithReference: Einsum equations with explicit and implicit outputs,
// traces and diagonals, the ellipsis with broadcast batch axes, outer products, three
// operands and full reductions, against the reference evaluator.
func TestEinsumAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		eq     string
		shapes [][]int
	}{
		{"ij,jk->ik", [][]int{{3, 5}, {5, 4}}},
		{"bij,bjk->bik", [][]int{{2, 3, 5}, {2, 5, 4}}},
		{"ii->i", [][]int{{4, 4}}},
		{"ii", [][]int{{5, 5}}},
		{"...ii->...i", [][]int{{2, 3, 4, 4}}},
		{"i,i", [][]int{{7}, {7}}},
		{"ij->", [][]int{{3, 6}}},
		{"ij,ij->ij", [][]int{{3, 4}, {3, 4}}},
		{"i,j->ij", [][]int{{3}, {5}}},
		{"...ij,...jk", [][]int{{2, 1, 3, 4}, {5, 4, 2}}},
		{"ijk->kji", [][]int{{2, 3, 4}}},
		{"ij,jk,kl->il", [][]int{{2, 3}, {3, 4}, {4, 5}}},
		{"ba", [][]int{{3, 2}}},
		{"bhid,bhjd->bhij", [][]int{{1, 2, 3, 8}, {1, 2, 5, 8}}},
	}
	for ci, c := range cases {
		t.Run(c.eq, func(t *testing.T) {
			var args []nt.Arg
			for k, s := range c.shapes {
				args = append(args, nt.In(f32(uint64(60+10*ci+k), s...)))
			}
			nt.CheckNode(t, l, graph.OpEinsum, &graph.EinsumAttrs{Equation: c.eq}, 1, args...)
		})
	}
}

// TestEinsumRefusalNamesTheEquation: an Einsum the definition does not handle (here,
// half-precision operands) is refused with the equation in the error.
func TestEinsumRefusalNamesTheEquation(t *testing.T) {
	l := Strategies(kernels.Default())
	x := tensor.New(tensor.Float16, tensor.Shape{2, 3})
	err := nt.LowerErr(t, l, graph.OpEinsum, &graph.EinsumAttrs{Equation: "ij->ji"}, 1, nt.In(x))
	if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), `"ij->ji"`) {
		t.Fatalf("error %v, want no kernel naming the equation", err)
	}
}

// unpoolIndices returns MaxPool-like indices for x of shape [N, C, d...]: each input
// position names a position of its own plane inside its pooling window (clipped to the
// default unpooled extents def), picked by a fixed pattern; windows that overlap make
// several inputs name the same output.
func unpoolIndices(shape, def, kern, stride, padLo []int) *tensor.Tensor {
	sp := len(shape) - 2
	total := tensor.Shape(shape).NumElements()
	v := make([]float64, total)
	inInner := tensor.Shape(shape[2:]).NumElements()
	defInner := tensor.Shape(def).NumElements()
	coord := make([]int, sp)
	for i := range v {
		plane, within := i/inInner, i%inInner
		for d := sp - 1; d >= 0; d-- {
			coord[d] = within % shape[2+d]
			within /= shape[2+d]
		}
		flat := 0
		for d := 0; d < sp; d++ {
			lo := coord[d]*stride[d] - padLo[d]
			c := lo + (i*5+d*3)%kern[d]
			c = min(max(c, max(lo, 0)), def[d]-1)
			flat = flat*def[d] + c
		}
		v[i] = float64(plane*defInner + flat)
	}
	return tensor.FromFloat64s(tensor.Int64, tensor.Shape(shape), v)
}

// TestMaxUnpoolAgreesWithReference: MaxUnpool in one and two spatial dims, with
// strides below, equal to and above the kernel, pads, and a constant output_shape
// larger than the default, against the reference evaluator.
func TestMaxUnpoolAgreesWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		shape, kern, stride, pads, outShape []int
	}{
		{[]int{2, 3, 4, 5}, []int{2, 2}, []int{2, 2}, nil, nil},
		{[]int{1, 2, 5, 4}, []int{3, 3}, []int{1, 2}, nil, nil},
		{[]int{1, 2, 3, 3}, []int{3, 2}, []int{2, 3}, []int{1, 0, 1, 1}, nil},
		{[]int{2, 2, 6}, []int{3}, []int{2}, nil, nil},
		{[]int{1, 1, 2, 2}, []int{2, 2}, []int{2, 2}, nil, []int{1, 1, 5, 5}},
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%v k%v s%v p%v out%v", c.shape, c.kern, c.stride, c.pads, c.outShape), func(t *testing.T) {
			sp := len(c.shape) - 2
			def, padLo := make([]int, sp), make([]int, sp)
			a := &graph.MaxUnpoolAttrs{}
			for d := 0; d < sp; d++ {
				a.KernelShape = append(a.KernelShape, int64(c.kern[d]))
				a.Strides = append(a.Strides, int64(c.stride[d]))
				pl, ph := 0, 0
				if c.pads != nil {
					pl, ph = c.pads[d], c.pads[d+sp]
				}
				padLo[d] = pl
				def[d] = (c.shape[2+d]-1)*c.stride[d] + c.kern[d] - pl - ph
			}
			for _, p := range c.pads {
				a.Pads = append(a.Pads, int64(p))
			}
			args := []nt.Arg{nt.In(f32(uint64(90+ci), c.shape...)), nt.In(unpoolIndices(c.shape, def, c.kern, c.stride, padLo))}
			if c.outShape != nil {
				s := make([]float64, len(c.outShape))
				for k, e := range c.outShape {
					s[k] = float64(e)
				}
				args = append(args, nt.C(tensor.FromFloat64s(tensor.Int64, tensor.Shape{len(s)}, s)))
			}
			nt.CheckNode(t, l, graph.OpMaxUnpool, a, 1, args...)
		})
	}
}

// TestMaxUnpoolIndexOutsideItsWindowFailsTheKernel: an index the gather cannot place
// (outside its input's pooling window, or outside the tensor) fails the kernel rather
// than being dropped.
func TestMaxUnpoolIndexOutsideItsWindowFailsTheKernel(t *testing.T) {
	l := Strategies(kernels.Default())
	a := &graph.MaxUnpoolAttrs{KernelShape: []int64{2, 2}, Strides: []int64{2, 2}}
	x := f32(5, 1, 1, 2, 2)
	for _, bad := range []float64{15, 16, -1} {
		ind := tensor.FromFloat64s(tensor.Int64, tensor.Shape{1, 1, 2, 2}, []float64{0, 3, bad, 10})
		args := []nt.Arg{nt.In(x), nt.In(ind)}
		m, _ := nt.Build(t, graph.OpMaxUnpool, a, 1, args...)
		_, _, err := nt.RunNode(l, m.Main.Nodes[len(m.Main.Nodes)-1], args)
		var ke *devices.KernelError
		if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange || ke.Detail[0] != int64(bad) {
			t.Errorf("index %v: error %v, want the kernel's index out of range naming it", bad, err)
		}
	}
}
