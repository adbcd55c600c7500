package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestFIFOIsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "weights.bin")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(p, -1); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("reading a FIFO: %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
}

func TestDirectoryAndDeviceAreRefused(t *testing.T) {
	for _, p := range []string{t.TempDir(), "/dev/null"} {
		if _, err := Open(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open(%s): %v, want ErrNotRegular", p, err)
		}
	}
}

func TestReadFileStopsAtTheLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, 99); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("100 bytes with a 99-byte limit: %v", err)
	}
	b, err := ReadFile(p, 100)
	if err != nil || len(b) != 100 {
		t.Fatalf("100 bytes with a 100-byte limit: %d bytes, %v", len(b), err)
	}
}

func TestWithinRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ok"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok", filepath.Join(root, "inner")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../x", "/etc/passwd", "link", "a/../../x", ""} {
		if _, err := Within(root, rel); err == nil {
			t.Errorf("Within(%q) accepted", rel)
		}
	}
	for _, rel := range []string{"ok", "inner", "./ok"} {
		if _, err := Within(root, rel); err != nil {
			t.Errorf("Within(%q): %v", rel, err)
		}
	}
}
