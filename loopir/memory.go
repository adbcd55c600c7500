package loopir

// Memory scopes (Buffer.Scope). A kernel's parameters are global; an allocation
// (Allocate) is local or shared.
const (
	// ScopeGlobal is device memory that every thread of a launch sees: the parameters.
	ScopeGlobal = "global"
	// ScopeLocal is private to the thread that runs the allocation: on a GPU, registers
	// (or the thread's private memory); on the CPU, a heap buffer of the kernel call.
	ScopeLocal = "local"
	// ScopeShared is one buffer per GPU block (work-group), allocated once for the block
	// and visible to all its threads (CUDA __shared__, OpenCL __local). Its allocation
	// is not under a loop bound to a threadIdx axis, and threads that read what other
	// threads wrote into it are separated from the writes by a Barrier.
	ScopeShared = "shared"
)

// Barrier is a work-group barrier over shared memory: each thread of a block waits there
// until every thread of the block has reached it, and the shared-memory writes made
// before it are visible to every thread of the block after it (CUDA __syncthreads(),
// OpenCL barrier(CLK_LOCAL_MEM_FENCE)). Every thread of a block must reach the same
// barriers in the same order, so a barrier is never under a condition, a loop bound or a
// block predicate that depends on a loop bound to a threadIdx axis (Verify), and never
// inside a block: barriers are placed after blocks are lowered (loopir/passes).
type Barrier struct{}

func (*Barrier) stmtNode() {}
