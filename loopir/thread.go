package loopir

import "fmt"

// ThreadAxis is one index of a GPU launch: the block (work-group) index or the thread
// (work-item) index within the block, along x, y or z.
type ThreadAxis uint8

const (
	BlockIdxX ThreadAxis = iota
	BlockIdxY
	BlockIdxZ
	ThreadIdxX
	ThreadIdxY
	ThreadIdxZ
	NumThreadAxes
)

var threadAxisNames = [...]string{"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z"}

func (a ThreadAxis) String() string {
	if a < NumThreadAxes {
		return threadAxisNames[a]
	}
	return fmt.Sprintf("thread-axis(%d)", uint8(a))
}

// IsBlock reports a block index (the grid's), as opposed to a thread index in a block.
func (a ThreadAxis) IsBlock() bool { return a <= BlockIdxZ }

// Dim is the axis's dimension: 0 for x, 1 for y, 2 for z.
func (a ThreadAxis) Dim() int { return int(a) % 3 }

// ParseThreadAxis reads the String form ("blockIdx.x" ... "threadIdx.z").
func ParseThreadAxis(s string) (ThreadAxis, bool) {
	for i, n := range threadAxisNames {
		if n == s {
			return ThreadAxis(i), true
		}
	}
	return 0, false
}

// Bound is the kind of a loop bound to a thread axis: the loop's iterations run as
// that index of a GPU launch, one iteration per block or thread, instead of in turn.
func Bound(a ThreadAxis) ForKind {
	if a >= NumThreadAxes {
		panic(fmt.Sprintf("BUG: loopir.Bound: %v is not a thread axis", a))
	}
	return boundFirst + ForKind(a)
}

// Thread is the axis a bound loop runs on (false for the other kinds).
func (k ForKind) Thread() (ThreadAxis, bool) {
	if k >= boundFirst && k < boundFirst+ForKind(NumThreadAxes) {
		return ThreadAxis(k - boundFirst), true
	}
	return 0, false
}

// Launch is the geometry a GPU kernel is launched with: per dimension (x, y, z), the
// number of blocks in the grid and of threads in a block, as expressions over the
// kernel's runtime dims (PrimFunc.Dims) and constants only, with the operators +, -,
// *, /, %, min and max (what a run-time kernel table can evaluate). A dimension no loop
// is bound to has extent 1.
type Launch struct {
	Grid, Block [3]Expr
}

// String prints "grid(x, y, z) block(x, y, z)".
func (l Launch) String() string {
	return "grid" + tripleString(l.Grid) + " block" + tripleString(l.Block)
}

func tripleString(t [3]Expr) string {
	return fmt.Sprintf("(%s, %s, %s)", ExprString(t[0]), ExprString(t[1]), ExprString(t[2]))
}
