package ref

import (
	"fmt"
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// attrs returns n's attribute struct as *A; a mismatch is a bug (the verifier checks it).
func attrs[A any](n *graph.Node) *A {
	a, ok := n.Attrs.(*A)
	if !ok {
		panic(fmt.Sprintf("BUG: node %v has attributes %T", n, n.Attrs))
	}
	return a
}

// broadcastIndex maps each linear index of a tensor of shape out to the linear index of
// the element of a tensor of shape in that numpy broadcasting reads (in is right-aligned,
// extents of 1 repeat).
func broadcastIndex(out, in tensor.Shape) []int {
	n := out.NumElements()
	idx := make([]int, n)
	if in.Equal(out) {
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	rank := len(out)
	strides := make([]int, rank) // input stride per output axis (0 where broadcast)
	inStrides := in.Strides()
	off := rank - len(in)
	for a := 0; a < len(in); a++ {
		if in[a] != 1 {
			strides[off+a] = inStrides[a]
		}
	}
	counter := make([]int, rank)
	cur := 0
	for i := 0; i < n; i++ {
		idx[i] = cur
		for a := rank - 1; a >= 0; a-- {
			counter[a]++
			cur += strides[a]
			if counter[a] < out[a] {
				break
			}
			cur -= strides[a] * counter[a]
			counter[a] = 0
		}
	}
	return idx
}

// tensorIns returns the broadcast output shape of ts and the index maps of each input.
func broadcastAll(ts ...*tensor.Tensor) (tensor.Shape, [][]int, error) {
	shapes := make([]tensor.Shape, len(ts))
	for i, t := range ts {
		shapes[i] = t.Shape
	}
	out, err := tensor.BroadcastShapes(shapes...)
	if err != nil {
		return nil, nil, Badf("%v", err)
	}
	maps := make([][]int, len(ts))
	for i, t := range ts {
		maps[i] = broadcastIndex(out, t.Shape)
	}
	return out, maps, nil
}

// take returns a tensor of the given shape whose element i is t's element idx[i].
func take(t *tensor.Tensor, shape tensor.Shape, idx []int) *tensor.Tensor {
	var data any
	switch d := t.Data.(type) {
	case []float32:
		data = takeSlice(d, idx)
	case []float64:
		data = takeSlice(d, idx)
	case []int64:
		data = takeSlice(d, idx)
	case []int32:
		data = takeSlice(d, idx)
	case []bool:
		data = takeSlice(d, idx)
	case []uint8:
		data = takeSlice(d, idx)
	case []int8:
		data = takeSlice(d, idx)
	default:
		src := reflect.ValueOf(t.Data)
		dst := reflect.MakeSlice(src.Type(), len(idx), len(idx))
		for i, j := range idx {
			dst.Index(i).Set(src.Index(j))
		}
		data = dst.Interface()
	}
	return tensor.MustFromSlice(shape, data)
}

func takeSlice[T any](src []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = src[j]
	}
	return out
}

// forEachIndex calls f with every multi-index of shape in row-major order, plus its
// linear position.
func forEachIndex(shape tensor.Shape, f func(lin int, idx []int)) {
	n := shape.NumElements()
	idx := make([]int, len(shape))
	for lin := 0; lin < n; lin++ {
		f(lin, idx)
		for a := len(shape) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
}

// linear returns the row-major offset of idx given strides.
func linear(idx, strides []int) int {
	off := 0
	for i, v := range idx {
		off += v * strides[i]
	}
	return off
}

// ints reads an integer tensor input as []int64, or nil if omitted.
func ints(t *tensor.Tensor) []int64 {
	if t == nil {
		return nil
	}
	return t.Int64s()
}
