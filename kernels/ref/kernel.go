package ref

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// ErrUnsupported: the op (or this use of it) has no reference implementation.
var ErrUnsupported = errors.New("not supported by the reference evaluator")

// ErrBadInput: a runtime value that the op cannot accept (wrong kind, dtype, shape,
// out-of-range index). Wrapped with the node.
var ErrBadInput = errors.New("invalid input")

// Kernel evaluates one node. in[i] is nil for an omitted optional input. It returns one
// Value per node output (a nil entry is allowed only for an output nobody can use).
type Kernel func(ec *Ctx, n *graph.Node, in []Value) ([]Value, error)

// TensorKernel is the common form: tensors in, tensors out (nil = omitted input).
type TensorKernel func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error)

// T adapts a TensorKernel to a Kernel, rejecting sequence/optional inputs.
func T(k TensorKernel) Kernel {
	return func(_ *Ctx, n *graph.Node, in []Value) ([]Value, error) {
		ts := make([]*tensor.Tensor, len(in))
		for i, v := range in {
			switch x := v.(type) {
			case nil:
			case *tensor.Tensor:
				ts[i] = x
			default:
				return nil, fmt.Errorf("%w: input %d is %s, want a tensor", ErrBadInput, i, Describe(v))
			}
		}
		outs, err := k(n, ts)
		if err != nil {
			return nil, err
		}
		vs := make([]Value, len(outs))
		for i, o := range outs {
			if o != nil {
				vs[i] = o
			}
		}
		return vs, nil
	}
}

// Badf builds an ErrBadInput error.
func Badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// kernelTable is indexed by graph.Op, assembled explicitly from the family lists.
var kernelTable = buildKernels(
	elementwiseKernels(),
	nnKernels(),
	nnxKernels(),
	quantKernels(),
	reduceKernels(),
	rnnKernels(),
	shapeKernels(),
	shapeMoreKernels(),
	controlKernels(),
	miscKernels(),
	extraKernels(),
	trainingKernels(),
	stringKernels(),
	signalKernels(),
	samplingKernels(),
	imageKernels(),
	randomKernels(),
)

func buildKernels(families ...map[graph.Op]Kernel) [graph.NumOps]Kernel {
	var t [graph.NumOps]Kernel
	for _, fam := range families {
		for op, k := range fam {
			if t[op] != nil {
				panic("BUG: duplicate reference kernel for " + op.String())
			}
			t[op] = k
		}
	}
	return t
}

// Has reports whether op has a reference kernel.
func Has(op graph.Op) bool { return op < graph.NumOps && kernelTable[op] != nil }
