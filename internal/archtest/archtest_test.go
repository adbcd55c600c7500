package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath   string
	Dir          string
	Imports      []string
	TestImports  []string
	XTestImports []string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Module       *struct{ Path string }
}

func listPackages(t *testing.T) (string, []pkg) {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "github.com/kilnrt/kiln/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return "github.com/kilnrt/kiln", pkgs
}

func rel(mod, path string) (string, bool) {
	if path == mod {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

func TestLayers(t *testing.T) {
	mod, pkgs := listPackages(t)
	for _, p := range pkgs {
		from, _ := rel(mod, p.ImportPath)
		lf, ok := layerOf(from)
		if !ok {
			t.Errorf("package %s has no layer in internal/archtest/layers.go", from)
			continue
		}
		for _, imp := range p.Imports {
			to, inModule := rel(mod, imp)
			if !inModule {
				continue
			}
			lt, ok := layerOf(to)
			if !ok {
				continue // reported for its own package
			}
			if lt >= lf {
				t.Errorf("%s (L%d) imports %s (L%d): only lower layers may be imported", from, lf, to, lt)
			}
			if matches(from, runtimeHalf) && matches(to, compilerHalf) {
				t.Errorf("%s is runtime half and must not import compiler-half %s", from, to)
			}
		}
	}
}

// TestOnlyCommandsImportConfigs: the server's config file is read by the command, which
// fills the libraries' typed options from it; no library imports configs.
func TestOnlyCommandsImportConfigs(t *testing.T) {
	mod, pkgs := listPackages(t)
	for _, bad := range configImportViolations(mod, pkgs) {
		t.Error(bad)
	}
}

// TestConfigImportRuleFlagsALibrary: the rule itself flags a library that imports
// configs (or a package below it), and passes the command's imports.
func TestConfigImportRuleFlagsALibrary(t *testing.T) {
	const mod = "github.com/kilnrt/kiln"
	pkgs := []pkg{
		{ImportPath: mod + "/serve", Imports: []string{mod + "/configs", mod + "/tensor"}},
		{ImportPath: mod + "/serve/httpapi", Imports: []string{mod + "/configs/sub"}},
		{ImportPath: mod + "/cmd/kiln", Imports: []string{mod + "/configs"}},
		{ImportPath: mod + "/cmd/kiln/internal/conformance", Imports: []string{mod + "/configs"}},
		{ImportPath: mod + "/configsx", Imports: []string{mod + "/tensor"}},
	}
	got := configImportViolations(mod, pkgs)
	if len(got) != 2 || !strings.Contains(got[0], "serve imports configs") || !strings.Contains(got[1], "serve/httpapi imports configs/sub") {
		t.Errorf("violations %q, want serve and serve/httpapi", got)
	}
}

var (
	initFunc  = regexp.MustCompile(`^func init\(\)`)
	generated = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)
)

func TestNoInitRegistration(t *testing.T) {
	_, pkgs := listPackages(t)
	for _, p := range pkgs {
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for line := 1; sc.Scan(); line++ {
				if generated.MatchString(sc.Text()) {
					break // generated code (protobuf descriptors) registers itself; not ours
				}
				if initFunc.MatchString(sc.Text()) {
					t.Errorf("%s:%d: init() is not allowed; build registries explicitly", path, line)
				}
			}
			fh.Close()
		}
	}
}

// configImportViolations lists the imports of configOnly packages by packages outside
// configImporters.
func configImportViolations(mod string, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, _ := rel(mod, p.ImportPath)
		if matches(from, configImporters) {
			continue
		}
		for _, imp := range p.Imports {
			if to, ok := rel(mod, imp); ok && matches(to, configOnly) {
				out = append(out, fmt.Sprintf("%s imports %s: only cmd/... reads the server config; pass what a library needs through its Options", from, to))
			}
		}
	}
	return out
}

func TestLayerOf(t *testing.T) {
	cases := map[string]int{"tensor": 0, "internal/archtest": 0, "loader/onnx": 3, "cmd/kiln/internal/conformance": 8, "cmd/kiln": 9, "kernels/cpu": 5, "internal/kerneltest": 5, "internal/nodetest": 5}
	for in, want := range cases {
		if got, ok := layerOf(in); !ok || got != want {
			t.Errorf("layerOf(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	if _, ok := layerOf("nowhere"); ok {
		t.Error("layerOf(nowhere) should be unknown")
	}
}

// forbidden lists, per importer, the module packages it may not import directly, with
// the reason: the seams the layering alone does not express.
var forbidden = []struct {
	from   []string // importers (patterns as in layers.go)
	to     []string // packages they may not import
	reason string
}{
	{[]string{"serve", "serve/httpapi", "serve/grpcapi"}, []string{"compiler", "graph/passes", "devices/cpu", "devices/cuda", "devices/opencl"},
		"serving reaches the compiler and the devices only through its Engine interface (package engine)"},
}

func TestForbiddenImports(t *testing.T) {
	mod, pkgs := listPackages(t)
	for _, p := range pkgs {
		from, _ := rel(mod, p.ImportPath)
		for _, rule := range forbidden {
			if !matches(from, rule.from) {
				continue
			}
			for _, imp := range p.Imports {
				if to, ok := rel(mod, imp); ok && matches(to, rule.to) {
					t.Errorf("%s imports %s: %s", from, to, rule.reason)
				}
			}
		}
	}
}
