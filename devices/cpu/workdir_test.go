package cpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestBuildsWorkInTheBaseAndCleanStaleClaims: with a base set (a cache's tmp/), builds
// happen in a work directory claimed there; a claim left by a process that died (its
// lock not held) is removed when the compiler claims; nothing of a build stays behind;
// Close removes the claim.
func TestBuildsWorkInTheBaseAndCleanStaleClaims(t *testing.T) {
	d := openOrSkip(t)
	defer d.Close()
	base := filepath.Join(t.TempDir(), "tmp")
	os.MkdirAll(filepath.Join(base, "cc-dead"), 0o700)
	os.WriteFile(filepath.Join(base, "cc-dead", "kernels.c"), []byte("int x;"), 0o600)
	os.WriteFile(filepath.Join(base, "cc-dead.lock"), nil, 0o600)
	cc := d.Compiler()
	cc.SetWorkBase(base)
	if _, err := cc.Build(context.Background(), fixtureSource); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		es, _ := os.ReadDir(base)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
			if e.IsDir() {
				inner, _ := os.ReadDir(filepath.Join(base, e.Name()))
				for _, i := range inner {
					out = append(out, e.Name()+"/"+i.Name())
				}
			}
		}
		return out
	}
	got := names()
	if len(got) != 2 || got[0] == "cc-dead" || filepath.Ext(got[1]) != ".lock" {
		t.Fatalf("the base holds %v, want one claim (its directory, empty, and its lock)", got)
	}
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("after Close the base holds %v", got)
	}
}

// TestDefaultWorkDirMustBeThisUsers: the per-user default (kiln-<uid> in $TMPDIR) is not
// used when someone else put something at that name first (here a symbolic link).
func TestDefaultWorkDirMustBeThisUsers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if base, err := userTempBase(); err != nil || base != filepath.Join(tmp, fmt.Sprintf("kiln-%d", os.Geteuid())) {
		t.Fatalf("fresh: %q %v", base, err)
	}
	os.Remove(filepath.Join(tmp, fmt.Sprintf("kiln-%d", os.Geteuid())))
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(tmp, fmt.Sprintf("kiln-%d", os.Geteuid())))
	if base, err := userTempBase(); err == nil {
		t.Fatalf("a symbolic link was taken as the work base: %q", base)
	}
	w := &workState{}
	if p := w.parent(); p != tmp {
		t.Fatalf("builds go to %q, want the temporary directory itself", p)
	}
}
