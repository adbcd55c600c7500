// Package testdata finds the data sets that tests use but the repository does not hold:
// the model zoo (../shared/zoo beside the checkout, or $KILN_ZOO), Debian's ONNX
// backend test data (/usr/share/libonnx-testdata/data, or $KILN_ONNX_TESTDATA) and the
// real-model set that bench/models/fetch.sh fetches ($KILN_MODELS, or
// ~/.cache/kiln-models).
//
// When a data set is absent a test is skipped with a message that says how to get it,
// unless KILN_REQUIRE_DATA=1 (set by CI), which turns the skip into a failure.
package testdata

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Require reports whether missing data must fail tests (KILN_REQUIRE_DATA=1).
func Require() bool { return os.Getenv("KILN_REQUIRE_DATA") == "1" }

func missing(t testing.TB, what, how string) {
	t.Helper()
	if Require() {
		t.Fatalf("%s is absent and KILN_REQUIRE_DATA=1: %s", what, how)
	}
	t.Skipf("%s is absent (%s); skipping", what, how)
}

// repoRoot is the module root, found from this source file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Zoo returns the model zoo directory, or skips/fails the test.
func Zoo(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KILN_ZOO")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "..", "shared", "zoo")
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		missing(t, "the model zoo ("+dir+")", "set KILN_ZOO or place shared/zoo beside the checkout")
	}
	return dir
}

// Models returns the real-model set's directory (bench/models/fetch.sh fills it), or
// skips the test. The set is fetched from package registries, not laid out with the
// checkout, so only a set that $KILN_MODELS names is required under KILN_REQUIRE_DATA=1:
// with the variable unset an absent set is a skip.
func Models(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KILN_MODELS")
	named := dir != ""
	if !named {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("the real-model set: no home directory (%v) and KILN_MODELS unset; skipping", err)
		}
		dir = filepath.Join(home, ".cache", "kiln-models")
	}
	if _, err := os.Stat(filepath.Join(dir, "models.tsv")); err != nil {
		how := "run bench/models/fetch.sh (it fills $KILN_MODELS, default ~/.cache/kiln-models)"
		if !named {
			t.Skipf("the real-model set (%s) is absent (%s); skipping", dir, how)
		}
		missing(t, "the real-model set ("+dir+")", how)
	}
	return dir
}

// ONNXData returns Debian's ONNX backend test data root (holding node/, simple/, ...).
func ONNXData(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KILN_ONNX_TESTDATA")
	if dir == "" {
		dir = "/usr/share/libonnx-testdata/data"
	}
	if _, err := os.Stat(filepath.Join(dir, "node")); err != nil {
		missing(t, "the ONNX backend test data ("+dir+")", "apt-get install libonnx-testdata")
	}
	return dir
}

// NoCompiler skips a test that needs the C compiler the CPU device builds kernels with
// (err says why there is none), or fails it under KILN_REQUIRE_DATA=1: CI installs gcc,
// so a compiled-engine test must not pass by skipping there.
func NoCompiler(t testing.TB, err error) {
	t.Helper()
	missing(t, "a C compiler ("+err.Error()+")", "apt-get install gcc, or set $CC")
}

// cCompilers are the names devices/cpu looks for (and common others).
var cCompilers = []string{"cc", "gcc", "clang", "tcc", "c99"}

// HideCCompilers takes every folder holding a C compiler off $PATH and clears $CC, for
// the rest of the process: a test binary whose TestMain calls it shows that its tests
// need no C compiler (a compile attempt fails instead of finding one). It returns the
// folders it removed.
func HideCCompilers() []string {
	var keep, removed []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		has := false
		for _, cc := range cCompilers {
			if st, err := os.Stat(filepath.Join(dir, cc)); err == nil && !st.IsDir() {
				has = true
			}
		}
		if has {
			removed = append(removed, dir)
		} else {
			keep = append(keep, dir)
		}
	}
	os.Setenv("PATH", strings.Join(keep, string(filepath.ListSeparator)))
	os.Setenv("CC", "")
	return removed
}
