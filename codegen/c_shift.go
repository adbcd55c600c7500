package codegen

import (
	"strconv"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// unsignedOf is the unsigned type of each integer width: shifts work on the unsigned
// representation, where C defines every count below the width.
var unsignedOf = map[tensor.DType]tensor.DType{
	tensor.Int8: tensor.Uint8, tensor.Int16: tensor.Uint16, tensor.Int32: tensor.Uint32, tensor.Int64: tensor.Uint64,
	tensor.Uint8: tensor.Uint8, tensor.Uint16: tensor.Uint16, tensor.Uint32: tensor.Uint32, tensor.Uint64: tensor.Uint64,
}

// shift prints a << b or a >> b (logical) with loopir's meaning: a count outside
// [0, width) gives 0. C leaves such counts undefined, so the shift is guarded, and the
// guard is a conditional expression so that the shift is never evaluated then. The
// result is truncated back to a's type (u8 and u16 operands are promoted to int).
func (e *cEmitter) shift(op loopir.BinOp, dt, cdt tensor.DType, a, b string) string {
	u, ok := unsignedOf[dt]
	if !ok || !cdt.IsInt() {
		e.fail("shift of %v by %v", dt, cdt)
		return "0"
	}
	t, ut := e.ctype(dt), e.ctype(u)
	cond := "(" + b + ") < " + strconv.Itoa(8*dt.Size())
	if cdt.IsSigned() {
		cond = "(" + b + ") >= 0 && " + cond
	}
	sh := map[loopir.BinOp]string{loopir.Shl: " << ", loopir.Shr: " >> "}[op]
	return "((" + t + ")(" + cond + " ? (" + ut + ")((" + ut + ")(" + a + ")" + sh + "(" + b + ")) : 0))"
}
