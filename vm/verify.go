package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Verify checks every reference inside the executable: registers within their frame,
// jumps within their function, and function, constant, kernel, binary and builtin indices
// within their tables. An executable that passes cannot make the interpreter index out
// of range.
func (x *Executable) Verify() error {
	if len(x.Functions) == 0 {
		return fmt.Errorf("%w: no functions", ErrFormat)
	}
	if x.Entry < 0 || x.Entry >= len(x.Functions) {
		return fmt.Errorf("%w: entry function %d of %d", ErrFormat, x.Entry, len(x.Functions))
	}
	for i, k := range x.Kernels {
		if k.Binary < 0 || k.Binary >= len(x.Binaries) {
			return fmt.Errorf("%w: kernel %d (%s) is in binary %d of %d", ErrFormat, i, k.Name, k.Binary, len(x.Binaries))
		}
		if k.Inputs < 0 || k.Outputs < 0 {
			return fmt.Errorf("%w: kernel %d (%s) has a negative argument count", ErrFormat, i, k.Name)
		}
		if len(k.Args) != k.Inputs+k.Outputs {
			return fmt.Errorf("%w: kernel %d (%s) describes %d arguments of %d", ErrFormat, i, k.Name, len(k.Args), k.Inputs+k.Outputs)
		}
		for j, a := range k.Args {
			if !a.DType.Valid() {
				return fmt.Errorf("%w: kernel %d (%s) argument %d has element type %d", ErrFormat, i, k.Name, j, a.DType)
			}
			if _, err := a.Elements.check(len(k.Dims)); err != nil {
				return fmt.Errorf("%w: kernel %d (%s) argument %d: %v", ErrFormat, i, k.Name, j, err)
			}
		}
		if k.Launch != nil {
			for j, e := range append(k.Launch.Grid[:], k.Launch.Block[:]...) {
				if _, err := e.check(len(k.Dims)); err != nil {
					return fmt.Errorf("%w: kernel %d (%s) launch %s %d: %v", ErrFormat, i, k.Name, [2]string{"grid", "block"}[j/3], j%3, err)
				}
			}
		}
	}
	if len(x.Inputs) != 0 && len(x.Inputs) != x.Functions[x.Entry].Params {
		return fmt.Errorf("%w: the signature lists %d inputs, the entry function takes %d", ErrFormat, len(x.Inputs), x.Functions[x.Entry].Params)
	}
	for _, io := range append(append([]IOInfo{}, x.Inputs...), x.Outputs...) {
		if !io.DType.Valid() {
			return fmt.Errorf("%w: signature entry %q has element type %d", ErrFormat, io.Name, io.DType)
		}
	}
	if err := x.verifyHostCalls(); err != nil {
		return err
	}
	for fi, f := range x.Functions {
		if f.Params < 0 || f.Regs < f.Params {
			return fmt.Errorf("%w: function %s has %d registers for %d parameters", ErrFormat, f.Name, f.Regs, f.Params)
		}
		for pc, in := range f.Code {
			if err := x.verifyInstr(f, pc, in); err != nil {
				return fmt.Errorf("%w: function %d (%s), instruction %d (%v): %v", ErrFormat, fi, f.Name, pc, in.Op, err)
			}
		}
	}
	return nil
}

func (x *Executable) verifyInstr(f Function, pc int, in Instr) error {
	reg := func(r Reg) error {
		if r < 0 || int(r) >= f.Regs {
			return fmt.Errorf("register %d outside a frame of %d", r, f.Regs)
		}
		return nil
	}
	for _, r := range append(append([]Reg{}, in.Args...), in.Dims...) {
		if err := reg(r); err != nil {
			return err
		}
	}
	args := func(n int) error {
		if len(in.Args) != n {
			return fmt.Errorf("%d arguments, want %d", len(in.Args), n)
		}
		return nil
	}
	index := func(n int, what string) error {
		if in.Imm < 0 || in.Imm >= int64(n) {
			return fmt.Errorf("%s %d of %d", what, in.Imm, n)
		}
		return nil
	}
	writes := true
	var err error
	switch in.Op {
	case Move, ShapeOf:
		err = args(1)
	case DeviceCopy:
		if err = args(1); err == nil {
			err = verifyImage(&in)
		}
	case Ret, KillRegister:
		err, writes = args(1), false
	case Invoke:
		if err = index(len(x.Functions), "function"); err == nil && len(in.Args) != x.Functions[in.Imm].Params {
			err = fmt.Errorf("%d arguments for %d parameters", len(in.Args), x.Functions[in.Imm].Params)
		}
	case InvokeKernel:
		writes = false
		if err = index(len(x.Kernels), "kernel"); err == nil {
			k := x.Kernels[in.Imm]
			switch {
			case in.In != k.Inputs || len(in.Args) != k.Inputs+k.Outputs:
				err = fmt.Errorf("%d arguments (%d inputs) for kernel %s with %d inputs and %d outputs", len(in.Args), in.In, k.Name, k.Inputs, k.Outputs)
			case len(in.Dims) != len(k.Dims):
				err = fmt.Errorf("%d dims for kernel %s with %d", len(in.Dims), k.Name, len(k.Dims))
			}
		}
	case CallBuiltin:
		err = index(len(x.Builtins), "builtin")
	case CallHost:
		err = x.verifyCallHost(&in)
	case AllocStorage:
		if len(in.Args) > 0 {
			err = args(1)
		}
		if err == nil && in.Imm < 0 {
			err = fmt.Errorf("negative size %d", in.Imm)
		}
		if err == nil {
			err = verifyImage(&in)
		}
	case AllocTensor, AllocTensorReg:
		want := 1
		if in.Op == AllocTensorReg {
			want = 2
		}
		if err = args(want); err == nil && !in.DType.Valid() {
			err = fmt.Errorf("element type %d", in.DType)
		}
		if err == nil {
			if _, berr := tensor.CheckedBytes(in.DType, in.Shape); berr != nil {
				err = fmt.Errorf("%s: %v", what(&in), berr)
			}
		}
	case LoadConst:
		err = index(len(x.Constants), "constant")
	case LoadConstInt, AllocTuple:
	case GetField:
		err = args(1)
	case If:
		err, writes = args(1), false
		if t := int64(pc) + in.Imm; err == nil && (t < 0 || t > int64(len(f.Code))) {
			err = fmt.Errorf("jump to %d outside %d instructions", t, len(f.Code))
		}
	case Goto:
		writes = false
		if t := int64(pc) + in.Imm; t < 0 || t > int64(len(f.Code)) {
			err = fmt.Errorf("jump to %d outside %d instructions", t, len(f.Code))
		}
	case ReshapeTensor:
		err = args(2)
	case Fatal:
		writes = false
	default:
		err = fmt.Errorf("unknown opcode")
	}
	if err == nil && writes {
		err = reg(in.Dst)
	}
	return err
}
