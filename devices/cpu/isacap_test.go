package cpu

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/target"
)

// capProbe fails to compile when the compiler targets an instruction set above the
// generic level's or the avx2 level's.
const capProbe = `
#if defined(CAP_GENERIC) && (defined(__AVX__) || defined(__SSE4_1__) || defined(__FMA__))
#error AVX or SSE4 enabled under the generic cap
#endif
#if defined(__AVX512F__)
#error AVX-512 enabled under a cap below avx512
#endif
int kiln_cap_probe(void) { return 0; }
`

func TestISACapSeparatesKeysAndCompilerFlags(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("%s caps x86 hosts; this host is %s", target.ISAEnv, runtime.GOARCH)
	}
	open := func(level string) *Device {
		t.Setenv(target.ISAEnv, level)
		d := openOrSkip(t)
		t.Cleanup(func() { d.Close() })
		return d
	}
	avx2, generic := open("avx2"), open("generic")
	if avx2.Info().Fingerprint == generic.Info().Fingerprint {
		t.Errorf("avx2 and generic caps share the device fingerprint %q", generic.Info().Fingerprint)
	}
	if generic.Info().Fingerprint != "cpu/amd64/" {
		t.Errorf("generic cap: device fingerprint %q, want no features", generic.Info().Fingerprint)
	}
	ia, ig := avx2.Compiler().Identity(), generic.Compiler().Identity()
	if ia == ig || !strings.Contains(ia, "-mno-avx512f") || !strings.Contains(ig, "-mno-avx ") {
		t.Errorf("compiler identities under the caps do not name their flags:\navx2:    %s\ngeneric: %s", ia, ig)
	}
	ctx := context.Background()
	if _, err := avx2.Compiler().CompileObject(ctx, capProbe); err != nil {
		t.Errorf("avx2 cap: %v", err)
	}
	if _, err := generic.Compiler().CompileObject(ctx, "#define CAP_GENERIC 1\n"+capProbe); err != nil {
		t.Errorf("generic cap: %v", err)
	}
}

func TestUnknownISACapRefusesToOpen(t *testing.T) {
	t.Setenv(target.ISAEnv, "avx1024")
	d, err := Open(Options{})
	if err == nil {
		d.Close()
	}
	if !errors.Is(err, target.ErrUnknownLevel) {
		t.Fatalf("Open with %s=avx1024: %v, want target.ErrUnknownLevel", target.ISAEnv, err)
	}
}
