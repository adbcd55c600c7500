package cpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/target"
)

// gccHashes is what gcc -### prints for -march=native (shortened), on a CPU with AVX2
// and without AVX-512 (avx512 "no") or with it ("yes").
func gccHashes(avx512 string) string {
	no := "-mno-avx512f -mno-avx512vl"
	if avx512 == "yes" {
		no = "-mavx512f -mavx512vl"
	}
	return `Using built-in specs.
COLLECT_GCC=gcc
Target: x86_64-linux-gnu
COLLECT_GCC_OPTIONS='-march=native' '-c' '-o' '/dev/null'
 /usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet -imultiarch x86_64-linux-gnu /dev/null "-march=znver3" -mmmx -mavx -mavx2 -mfma ` + no + ` -mbmi2 -mf16c --param "l1-cache-size=32" "-mtune=znver3" -quiet -dumpbase null -o /tmp/ccX.s
COLLECT_GCC_OPTIONS='-march=native' '-c' '-o' '/dev/null'
 as --64 -o /dev/null /tmp/ccX.s
`
}

const clangHashes = `Debian clang version 14.0.6
Target: x86_64-pc-linux-gnu
 "/usr/lib/llvm-14/bin/clang" "-cc1" "-triple" "x86_64-pc-linux-gnu" "-emit-obj" "-mrelocation-model" "pic" "-target-cpu" "skylake-avx512" "-target-feature" "+avx512f" "-target-feature" "-amx-tile" "-tune-cpu" "skylake-avx512" "-x" "c" "/dev/null"
`

func TestParseNative(t *testing.T) {
	cases := []struct{ out, want string }{
		{gccHashes("no"), `-march=znver3 -mmmx -mavx -mavx2 -mfma -mno-avx512f -mno-avx512vl -mbmi2 -mf16c --param l1-cache-size=32 -mtune=znver3`},
		{clangHashes, `-mrelocation-model -target-cpu skylake-avx512 -target-feature +avx512f -target-feature -amx-tile -tune-cpu skylake-avx512`},
	}
	for _, c := range cases {
		if got, err := parseNative(c.out); err != nil || got != c.want {
			t.Errorf("got %q, %v\nwant %q", got, err, c.want)
		}
	}
	if _, err := parseNative("tcc version 0.9.27\n"); err == nil {
		t.Error("a driver without -### output resolved")
	}
}

// fakeCompiler writes a shell script that answers --version and -### like gcc does on a
// CPU with or without AVX-512.
func fakeCompiler(t *testing.T, avx512 string) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "hashes.txt")
	os.WriteFile(out, []byte(gccHashes(avx512)), 0o644)
	script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\n--version) echo 'gcc (Fake) 12.2.0';;\n-###) cat %s >&2;;\nesac\n", out)
	path := filepath.Join(dir, "fakecc")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKeyIdentityNamesTheResolvedTarget: two machines whose compiler resolves
// -march=native differently (one has AVX-512) get different identities, so they never
// share object code; the same resolution gives the same identity; the literal
// -march=native alone never stands in the identity.
func TestKeyIdentityNamesTheResolvedTarget(t *testing.T) {
	var ids []string
	for _, avx512 := range []string{"no", "yes", "no"} {
		t.Setenv("CC", fakeCompiler(t, avx512))
		c, err := FindCompiler()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Native, "-mavx512f") == (avx512 == "yes") {
			t.Fatalf("avx512 %s: resolved %q", avx512, c.Native)
		}
		id := c.Identity()
		if !strings.Contains(id, "-march=native(-march=znver3 sha256:") {
			t.Fatalf("identity %q", id)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] || ids[0] != ids[2] {
		t.Fatalf("identities %q", ids)
	}
}

// TestCompilerThatRefusesMarchNativeBuildsForItsDefaultTarget: a cross compiler (one
// whose -### leaves -march=native unresolved and that refuses to compile with it) is
// used without -march=native, its identity naming its version and flags only; a
// compiler that resolves the flag keeps it.
func TestCompilerThatRefusesMarchNativeBuildsForItsDefaultTarget(t *testing.T) {
	dir := t.TempDir()
	script := `#!/bin/sh
case "$1" in
--version) echo 'aarch64-linux-gnu-gcc (Fake) 12.2.0'; exit 0;;
-###) echo ' cc1 -quiet "-march=native" -mlittle-endian "-mabi=lp64"' >&2; exit 0;;
esac
for a in "$@"; do [ "$a" = -march=native ] && { echo "cc1: error: unknown value 'native' for '-march'" >&2; exit 1; }; done
exit 0
`
	path := filepath.Join(dir, "crosscc")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CC", path)
	t.Setenv(target.ISAEnv, "")
	c, err := FindCompiler()
	if err != nil {
		t.Fatal(err)
	}
	id := c.Identity()
	if c.Native != "" || strings.Contains(id, "-march") || !strings.HasPrefix(id, "aarch64-linux-gnu-gcc (Fake) 12.2.0 -O3 ") {
		t.Fatalf("cross compiler: native %q, identity %q", c.Native, id)
	}

	t.Setenv("CC", fakeCompiler(t, "no"))
	if c, err = FindCompiler(); err != nil || !strings.Contains(c.Identity(), "-march=native(") {
		t.Fatalf("native compiler: %v, identity %q", err, c.Identity())
	}
}
