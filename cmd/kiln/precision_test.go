package main

import (
	"errors"
	"strings"
	"testing"
)

// TestPrecisionFlagIsCheckedBeforeAnyDeviceOpens: --precision fp16 and an unknown
// precision are usage errors naming the flag (fp16: not built yet).
func TestPrecisionFlagIsCheckedBeforeAnyDeviceOpens(t *testing.T) {
	for p, msg := range map[string]string{"fp16": "not built yet", "half": "want fp32 or tf32"} {
		_, err := targetFlags{precision: p}.open(1, false)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--precision") || !strings.Contains(err.Error(), msg) {
			t.Errorf("--precision %s: %v, want a usage error saying %q", p, err, msg)
		}
	}
}
