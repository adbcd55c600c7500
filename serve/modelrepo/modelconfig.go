package modelrepo

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// ErrModelConfig is wrapped by every error about a model configuration: one that does
// not parse (*SyntaxError) and one that parses but breaks a rule (*FieldError).
var ErrModelConfig = errors.New("invalid model config")

// MaxModelConfigBytes bounds the size of a config.pbtxt that ParseModelConfig reads.
const MaxModelConfigBytes = 1 << 20

// maxWarnings bounds the list of untranscribed fields that ParseModelConfig returns.
const maxWarnings = 64

// A SyntaxError is a model config that is not valid protobuf text format for
// modelpb.ModelConfig. Line and Column are 1-based (the column counts runes); both are
// 0 when the error has no position.
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "model config: " + e.Msg
	}
	return fmt.Sprintf("model config: line %d:%d: %s", e.Line, e.Column, e.Msg)
}

// Unwrap makes errors.Is(err, ErrModelConfig) true.
func (e *SyntaxError) Unwrap() error { return ErrModelConfig }

// A FieldError is a model config that parses but whose field breaks a rule. Field is
// the path of the offending field in Triton's names, with indices for repeated fields
// and keys for maps: "input[1].dims[0]", "model_warmup[0].inputs[\"x\"].dims".
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "model config: " + e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrModelConfig) true.
func (e *FieldError) Unwrap() error { return ErrModelConfig }

// ParseModelConfig parses a Triton model configuration in protobuf text format (a
// config.pbtxt). Fields that kiln does not transcribe (Triton's optimization,
// ensemble_scheduling, ..., or anything unknown) are left out of the result; each is
// named, with its position, in the returned list, and the server refuses a config
// whose list is not empty (kiln does not implement those fields). Unknown enum value names in known fields are
// errors, as in Triton. Every error wraps ErrModelConfig; a parse error is a
// *SyntaxError with the line and column. The result is not validated: see
// ValidateModelConfig.
func ParseModelConfig(data []byte) (*modelpb.ModelConfig, []string, error) {
	if len(data) > MaxModelConfigBytes {
		return nil, nil, &SyntaxError{Msg: fmt.Sprintf("%d bytes is more than the limit of %d", len(data), MaxModelConfigBytes)}
	}
	// First pass: is this valid text format at all, unknown fields aside? Its result
	// is the answer when the unknown fields cannot be listed.
	lenient := &modelpb.ModelConfig{}
	if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, lenient); err != nil {
		return nil, nil, syntaxError(data, err)
	}
	ignored, err := findUnknownFields(data, lenient.ProtoReflect().Descriptor())
	if err != nil {
		if _, ok := err.(*SyntaxError); ok { // nested too deep
			return nil, nil, err
		}
		// The scanner disagrees with the protobuf decoder about input the decoder
		// accepted; fall back to the decoder's result rather than reject it.
		return lenient, []string{"the fields kiln does not implement cannot be listed: " + err.Error()}, nil
	}
	// Second pass: strict, with the unknown fields blanked out (newlines kept, so that
	// positions in errors are those of the original).
	src := data
	var warnings []string
	if len(ignored) > 0 {
		src = append([]byte(nil), data...)
		for i, f := range ignored {
			for j := f.start; j < f.end; j++ {
				if src[j] != '\n' {
					src[j] = ' '
				}
			}
			if i < maxWarnings {
				line, col := position(data, f.start)
				warnings = append(warnings, fmt.Sprintf("field %s (line %d:%d): kiln does not implement it", f.path, line, col))
			}
		}
		if len(ignored) > maxWarnings {
			warnings = append(warnings, fmt.Sprintf("%d more fields kiln does not implement", len(ignored)-maxWarnings))
		}
	}
	c := &modelpb.ModelConfig{}
	if err := prototext.Unmarshal(src, c); err != nil {
		return nil, nil, syntaxError(data, err)
	}
	return c, warnings, nil
}

var positionRE = regexp.MustCompile(`\(line (\d+):(\d+)\): (?s)(.*)$`)

// syntaxError turns an error of the protobuf text decoder into a *SyntaxError.
func syntaxError(data []byte, err error) error {
	msg := err.Error()
	if m := positionRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		return &SyntaxError{Line: line, Column: col, Msg: m[3]}
	}
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(msg, "proto:"), "\u00a0"))
	if strings.Contains(msg, "unexpected EOF") {
		line, col := position(data, len(data))
		return &SyntaxError{Line: line, Column: col, Msg: "unexpected end of input"}
	}
	return &SyntaxError{Msg: msg}
}
