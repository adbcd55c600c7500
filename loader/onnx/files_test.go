package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kilnrt/kiln/internal/safefile"
)

// externalDir writes a model whose initializer w (3 floats at offset 4) lives in
// weights/w.bin.
func externalDir(t *testing.T, weights []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "weights"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights", "w.bin"), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, externalModel("weights/w.bin"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScanDigestIsTheFilesDigest(t *testing.T) {
	p := externalDir(t, make([]byte, 16))
	sc, err := Scan(p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Digest(p)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Digest != d || len(sc.Interface.Inputs) != 1 || sc.Interface.Inputs[0].Name != "x" || len(sc.Stamp) != 2 {
		t.Fatalf("scan: digest %s (files %s), inputs %v, %d stamps", sc.Digest, d, sc.Interface.Inputs, len(sc.Stamp))
	}
}

// TestLoadVerifiedRefusesContentOtherThanTheDigest: the model is compiled only from the
// bytes its journal key names; new weights or a new model file under the same digest
// are ErrChanged, never loaded.
func TestLoadVerifiedRefusesContentOtherThanTheDigest(t *testing.T) {
	p := externalDir(t, make([]byte, 16))
	sc, err := Scan(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadVerified(p, sc.Digest, Options{}); err != nil {
		t.Fatalf("unchanged files: %v", err)
	}
	if sc.Stamp.Changed() {
		t.Fatal("unchanged files report a change")
	}
	time.Sleep(10 * time.Millisecond) // a later modification time
	w := make([]byte, 16)
	w[6] = 1
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "weights", "w.bin"), w, 0o644); err != nil {
		t.Fatal(err)
	}
	if !sc.Stamp.Changed() {
		t.Fatal("rewritten weights not noticed by the stamp")
	}
	if _, err := LoadVerified(p, sc.Digest, Options{}); !errors.Is(err, ErrChanged) {
		t.Fatalf("new weights under the old digest: %v, want ErrChanged", err)
	}
	again, err := Scan(p)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest == sc.Digest {
		t.Fatal("new weights kept the digest")
	}
	if _, err := LoadVerified(p, again.Digest, Options{}); err != nil {
		t.Fatalf("new weights under their digest: %v", err)
	}
}

// TestFIFOExternalDataIsRefusedAtOnce: a FIFO where the weights should be never blocks
// the loader, the digest or the scan.
func TestFIFOExternalDataIsRefusedAtOnce(t *testing.T) {
	p := externalDir(t, make([]byte, 16))
	w := filepath.Join(filepath.Dir(p), "weights", "w.bin")
	if err := os.Remove(w); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(w, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for name, f := range map[string]func() error{
		"Load":         func() error { _, err := Load(p, Options{}); return err },
		"Digest":       func() error { _, err := Digest(p); return err },
		"Scan":         func() error { _, err := Scan(p); return err },
		"LoadVerified": func() error { _, err := LoadVerified(p, "x", Options{}); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if !errors.Is(err, safefile.ErrNotRegular) && !errors.Is(err, ErrInvalid) {
				t.Errorf("%s with a FIFO as external data: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked on a FIFO", name)
		}
	}
}

func TestFIFOModelFileIsRefusedAtOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "model.onnx")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 3)
	go func() { _, err := Load(p, Options{}); done <- err }()
	go func() { _, err := Scan(p); done <- err }()
	go func() { _, err := ReadInterface(p); done <- err }()
	for range 3 {
		select {
		case err := <-done:
			if err == nil {
				t.Error("a FIFO model file was read")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a FIFO model file blocked a reader")
		}
	}
}
