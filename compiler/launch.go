package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/vm"
)

// kernelArgs describes what a lowered kernel may touch through each parameter (its
// elements over the runtime dims), for the VM's check of every launch.
func kernelArgs(f *loopir.PrimFunc) ([]vm.KernelArg, error) {
	dims := map[*loopir.Var]int64{}
	for i, d := range f.Dims {
		dims[d] = int64(i)
	}
	args := make([]vm.KernelArg, len(f.Params))
	for i, p := range f.Params {
		ext, err := extentProgram(p.Elements(), dims)
		if err != nil {
			return nil, fmt.Errorf("BUG: kernel parameter %s has extent %s: %w", p.Name, loopir.ExprString(p.Elements()), err)
		}
		args[i] = vm.KernelArg{DType: p.DT, Elements: ext}
	}
	return args, nil
}

var extentOps = map[loopir.BinOp]int64{
	loopir.Add: vm.ExtAdd, loopir.Sub: vm.ExtSub, loopir.Mul: vm.ExtMul, loopir.Div: vm.ExtDiv,
	loopir.Mod: vm.ExtMod, loopir.Min: vm.ExtMin, loopir.Max: vm.ExtMax,
}

// extentProgram encodes an integer expression over the dims as a vm.Extent.
func extentProgram(x loopir.Expr, dims map[*loopir.Var]int64) (vm.Extent, error) {
	switch x := x.(type) {
	case *loopir.IntImm:
		return vm.ConstExtent(x.V), nil
	case *loopir.Var:
		i, ok := dims[x]
		if !ok {
			return nil, fmt.Errorf("%s is not a runtime dim", x.Name)
		}
		return vm.Extent{vm.ExtDim, i}, nil
	case *loopir.Binary:
		op, ok := extentOps[x.Op]
		if !ok {
			return nil, fmt.Errorf("operation %v", x.Op)
		}
		a, err := extentProgram(x.A, dims)
		if err != nil {
			return nil, err
		}
		b, err := extentProgram(x.B, dims)
		if err != nil {
			return nil, err
		}
		return append(append(a, b...), op), nil
	}
	return nil, fmt.Errorf("expression %s", loopir.ExprString(x))
}

// launch derives a GPU kernel's geometry from its bound loops, verifies it against
// p's target limits and encodes it over the kernel's runtime dims for the kernel table;
// it returns the kernel to print (thread loops over a tail get their guard).
func (c *compile) launch(p *place, f *loopir.PrimFunc) (*loopir.PrimFunc, *vm.KernelLaunch, error) {
	g, l, err := lpasses.DeriveLaunch(f)
	if err != nil {
		return nil, nil, err
	}
	if err := lpasses.VerifyLaunch(g, l, p.t.GPU); err != nil {
		return nil, nil, err
	}
	dims := map[*loopir.Var]int64{}
	for i, d := range g.Dims {
		dims[d] = int64(i)
	}
	out := &vm.KernelLaunch{}
	for i := range 3 {
		if out.Grid[i], err = extentProgram(l.Grid[i], dims); err != nil {
			return nil, nil, fmt.Errorf("BUG: grid extent %s: %w", loopir.ExprString(l.Grid[i]), err)
		}
		if out.Block[i], err = extentProgram(l.Block[i], dims); err != nil {
			return nil, nil, fmt.Errorf("BUG: block extent %s: %w", loopir.ExprString(l.Block[i]), err)
		}
	}
	return g, out, nil
}
