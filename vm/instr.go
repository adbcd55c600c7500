package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Opcode is a VM instruction kind. New capability goes into the builtin or host op
// tables, not into new opcodes.
type Opcode uint8

const (
	Move           Opcode = iota // Dst = Args[0]
	Ret                          // return Args[0]
	Invoke                       // Dst = Functions[Imm](Args...)
	InvokeKernel                 // Kernels[Imm](inputs Args[:In], outputs Args[In:]); Dims from registers Args2
	CallBuiltin                  // Dst = Builtins[Imm](Args...)
	AllocStorage                 // Dst = storage of Imm bytes (plus the int64 scalar in Args[0], when given) on device Device
	AllocTensor                  // Dst = tensor of DType and Shape in storage Args[0] at offset Imm
	AllocTensorReg               // Dst = tensor of DType, shape from register Args[1], in storage Args[0] at offset Imm
	LoadConst                    // Dst = Constants[Imm]
	LoadConstInt                 // Dst = the int64 scalar Imm
	If                           // if Args[0] (a bool/int scalar) != 0 skip 1 else jump by Imm
	Goto                         // jump by Imm (relative)
	ShapeOf                      // Dst = the shape of Args[0] as an int64 tensor
	ReshapeTensor                // Dst = Args[0] viewed with the shape in Args[1] (no copy)
	DeviceCopy                   // Dst = Args[0] copied to device Device
	AllocTuple                   // Dst = (Args...)
	GetField                     // Dst = Args[0].fields[Imm]
	KillRegister                 // Args[0] is dead; its value may be freed (a storage of this call returns to the pool at once)
	Fatal                        // stop with the message Str (ErrInput: these inputs cannot run here)
	CallHost                     // Dst = the tuple of HostCalls[Imm](Args...)'s outputs, host tensors (hostop.go); Str names the node
	numOpcodes
)

var opNames = [...]string{"move", "ret", "invoke", "invoke_kernel", "call_builtin", "alloc_storage",
	"alloc_tensor", "alloc_tensor_reg", "load_const", "load_const_int", "if", "goto", "shape_of",
	"reshape_tensor", "device_copy", "alloc_tuple", "get_field", "kill_register", "fatal", "call_host"}

func (o Opcode) String() string {
	if o < numOpcodes {
		return opNames[o]
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// Reg names a register of the current frame.
type Reg int32

// Instr is one instruction; which fields an opcode uses is listed at the opcode.
type Instr struct {
	Op     Opcode
	Dst    Reg
	Args   []Reg
	Dims   []Reg // InvokeKernel: registers holding the kernel's runtime dims
	In     int   // InvokeKernel: how many of Args are inputs
	Imm    int64
	DType  tensor.DType
	Shape  []int64
	Device int
	Str    string // Fatal: the message
}

// Function is a VM function: Params registers receive the arguments, Regs is the frame
// size, Code runs from index 0.
type Function struct {
	Name   string
	Params int
	Regs   int
	Code   []Instr
}

// KernelInfo is one entry of the kernel table: the entry point Name in Binaries[Binary],
// its argument count (inputs then outputs), the names of its runtime dims in order and
// the extent of each argument.
type KernelInfo struct {
	Name    string
	Binary  int
	Inputs  int
	Outputs int
	Dims    []string
	// Args describes each argument (inputs, then outputs): the elements the kernel may
	// touch, over Dims. Every launch checks its tensors against them.
	Args []KernelArg
	// Launch is a GPU kernel's launch geometry over Dims; nil for a CPU kernel (which
	// parallelizes inside and ignores the geometry).
	Launch *KernelLaunch
}

// KernelLaunch is a GPU kernel's launch geometry: blocks (work-groups) per grid and
// threads (work-items) per block in each of three dimensions, each an Extent over the
// kernel's runtime dims. A grid extent that evaluates to 0 means there is no work and
// the launch is skipped; every block extent must be positive.
type KernelLaunch struct {
	Grid, Block [3]Extent
}

// Binary is a device binary (a shared object for the CPU, PTX/cubin or an OpenCL program
// binary later) with the fingerprint of the device and toolchain it was built for.
type Binary struct {
	Device      string
	Fingerprint string
	Data        []byte
}

// Executable is a compiled model.
type Executable struct {
	Functions []Function
	Entry     int // index of the function a request invokes
	Constants []*tensor.Tensor
	Kernels   []KernelInfo
	Binaries  []Binary
	Builtins  []string // names resolved against the VM's builtin table at load time
	// HostCalls are the host op uses CallHost indexes: op names resolved against the
	// VM's host op table at load time, with their attributes.
	HostCalls []HostCall
	// Inputs and Outputs describe the entry function's parameters and results (a
	// multi-output entry returns a tuple): what a server checks requests against.
	Inputs, Outputs []IOInfo

	// mapped: Decode made some constants alias its data argument; backing is Decode's
	// backing argument (e.g. the object whose cleanup unmaps that data), kept reachable
	// for as long as the executable is.
	mapped  bool
	backing any
}

// IOInfo names one input or output of the entry function with its kind, element type
// and shape; an extent of -1 is dynamic. For a sequence or an optional, DType and Shape
// describe each element (UnknownRank: elements of any rank); a tensor's rank is known.
type IOInfo struct {
	Name        string
	Kind        IOKind
	DType       tensor.DType
	Shape       []int64
	UnknownRank bool
}

// TypeString prints the type as graph types do: "f32[1,3,224,224]", a dynamic extent
// as "?", "seq<f32[?]>", "opt<f32[4]>", "opt<seq<f32[*]>>".
func (io IOInfo) TypeString() string {
	e := elemString(io.DType, io.Shape, io.UnknownRank)
	switch io.Kind {
	case IOSequence:
		return "seq<" + e + ">"
	case IOOptional:
		return "opt<" + e + ">"
	case IOOptSequence:
		return "opt<seq<" + e + ">>"
	}
	return e
}
