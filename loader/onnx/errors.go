package onnx

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loader"
)

// Options are the shared loader options.
type Options = loader.Options

var (
	// ErrInvalid is loader.ErrInvalid: a malformed model or data file.
	ErrInvalid = loader.ErrInvalid
	// ErrUnsupported is loader.ErrUnsupported: something kiln cannot represent.
	ErrUnsupported = loader.ErrUnsupported
	// ErrUnsupportedOp is wrapped (together with ErrUnsupported) for unknown ops.
	ErrUnsupportedOp = errors.New("unsupported operator")
)

// UnsupportedOpError names an op that cannot be loaded and why.
type UnsupportedOpError struct {
	Domain string
	Op     string
	Node   string
	Opset  int64
	Reason string
}

func (e *UnsupportedOpError) Error() string {
	dom := e.Domain
	if dom == "" {
		dom = "ai.onnx"
	}
	return fmt.Sprintf("op %s (domain %s, opset %d, node %q): %s", e.Op, dom, e.Opset, e.Node, e.Reason)
}

// Is makes errors.Is(err, ErrUnsupported) and errors.Is(err, ErrUnsupportedOp) hold.
func (e *UnsupportedOpError) Is(target error) bool {
	return target == ErrUnsupported || target == ErrUnsupportedOp
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}
