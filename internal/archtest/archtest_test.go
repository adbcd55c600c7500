package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
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
