package cuda

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/devices"
)

// TestFinishCompilesPTXToACubinThatRuns: Finish turns the fixture's PTX into an ELF
// cubin that loads and runs like the PTX; a cubin comes back unchanged; garbage PTX is
// ErrLoad; the finish key names the driver and the architecture.
func TestFinishCompilesPTXToACubinThatRuns(t *testing.T) {
	d := deviceOrSkip(t)
	ptx, _ := loadFixture(t, d)
	cubin, err := d.Finish(ptx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cubin, elfMagic) {
		t.Fatalf("Finish gave %.16q, want an ELF cubin", cubin)
	}
	again, err := d.Finish(cubin)
	if err != nil || !bytes.Equal(again, cubin) {
		t.Errorf("finishing a cubin: %v (changed: %v)", err, !bytes.Equal(again, cubin))
	}
	mod, err := d.Load(cubin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel("kiln_test_axpy")
	if err != nil {
		t.Fatal(err)
	}
	if err := axpyRoundTrip(d, k, 1000, 1.5); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Finish([]byte(".version 7.0\n.target sm_90\nthis is not ptx")); !errors.Is(err, devices.ErrLoad) {
		t.Errorf("garbage PTX: %v, want ErrLoad", err)
	}
	t.Logf("%d bytes of PTX, %d of cubin; key %q", len(ptx), len(cubin), d.FinishKey())
}
