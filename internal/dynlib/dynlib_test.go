package dynlib

import (
	"strings"
	"testing"
)

// TestOpenNamesEveryAttempt: a list of libraries none of which loads is an error naming
// each of them; the environment's path comes first.
func TestOpenNamesEveryAttempt(t *testing.T) {
	t.Setenv("KILN_DYNLIB_TEST", "/nonexistent/libfromenv.so")
	cands := EnvFirst("KILN_DYNLIB_TEST", InDirs([]string{"/nonexistent/a", "/nonexistent/b"}, "libx.so.1"))
	if cands[0] != "/nonexistent/libfromenv.so" || len(cands) != 3 || cands[2] != "/nonexistent/b/libx.so.1" {
		t.Fatalf("candidates %q", cands)
	}
	_, _, err := Open(cands)
	if err == nil {
		t.Fatal("opened a library that does not exist")
	}
	for _, c := range cands {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not name %s", err, c)
		}
	}
}

func TestCStringIsTerminated(t *testing.T) {
	if b := CString("abc"); string(b) != "abc\x00" {
		t.Fatalf("%q", b)
	}
}
