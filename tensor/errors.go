package tensor

import "errors"

// Sentinel errors; wrap them with context and test with errors.Is.
var (
	// ErrDType: an element type that is unknown or not allowed where it was used.
	ErrDType = errors.New("unsupported element type")
	// ErrShape: a shape that is invalid or does not match the data.
	ErrShape = errors.New("invalid shape")
	// ErrTooLarge: a tensor whose size exceeds the configured limit.
	ErrTooLarge = errors.New("tensor too large")
)
