package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
)

// tree lists the names, sizes and modification times under dir.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		fmt.Fprintf(&b, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return b.String()
}

// TestCacheLsAndVerifyOnlyRead: kiln cache ls and verify open the journal read-only:
// they list and check a cache without creating a subdirectory, repairing its torn tail
// or writing a record.
func TestCacheLsAndVerifyOnlyRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	j, err := compilecache.Open(compilecache.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := compilecache.Material{Kind: compilecache.KindExecutable, Parts: []compilecache.Component{{Name: "model", Value: "m"}}}
	if err := j.Put(m, "listed", []byte("executable"), 0); err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, d := range []string{"locks", "quarantine", "tmp"} {
		os.Remove(filepath.Join(dir, d))
	}
	f, _ := os.OpenFile(filepath.Join(dir, "journal"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{40, 0, 0}) // a torn tail
	f.Close()
	before := tree(t, dir)
	for _, args := range [][]string{{"ls"}, {"verify"}} {
		cmd := cacheCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append(args, "--cache-dir", dir))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		if !strings.Contains(out.String(), "1 entries") {
			t.Fatalf("%v printed %q", args, out.String())
		}
		if after := tree(t, dir); after != before {
			t.Fatalf("%v changed the cache:\nbefore\n%s\nafter\n%s", args, before, after)
		}
	}
}
