package httpapi

import (
	"os"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestMain runs the tests with every C compiler hidden: the service runs on the test
// engine (serve/servetest), and the protocol tests must pass on a machine without one.
func TestMain(m *testing.M) {
	testdata.HideCCompilers()
	os.Exit(m.Run())
}
