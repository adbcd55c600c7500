package workdir

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCleanRemovesOnlyClaimsNobodyHolds: a held claim survives Clean; once its lock is
// dropped without Release (its process died) Clean removes the directory and the lock;
// Release removes its own.
func TestCleanRemovesOnlyClaimsNobodyHolds(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tmp")
	live, err := Claim(base, "cc-", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := Claim(base, "cc-", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dead.Path, "unit.c"), []byte("int x;"), 0o600)
	dead.lock.Close() // what the kernel does when the process dies
	n, err := Clean(base, "")
	if err != nil || n != 1 {
		t.Fatalf("removed %d: %v", n, err)
	}
	if _, err := os.Stat(dead.Path); !os.IsNotExist(err) {
		t.Fatalf("the dead claim's directory: %v", err)
	}
	if _, err := os.Stat(dead.Path + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("the dead claim's lock: %v", err)
	}
	if st, err := os.Stat(live.Path); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the live claim: %v %v", st, err)
	}
	if err := live.Release(); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(base)
	if len(left) != 0 {
		t.Fatalf("left after Release: %v", left)
	}
}
