package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// isaFeature matches the name of an ISA extension as target.Feature spells them
// ("avx2", "avx512f", "fma", "sse4.1", "neon", "sve", ...).
var isaFeature = regexp.MustCompile(`(?i)^(sse[0-9.]*|ssse3|avx[0-9a-z_]*|fma[0-9]*|f16c|bmi[0-9]*|amx[0-9a-z_-]*|neon|asimd[a-z]*|sve[0-9]*)$`)

// isaUses lists, as "file:line: what", the places in a Go file that know about a target's
// ISA: an ISA extension named in a string literal, a feature query (x.Has("...")), or the
// target's feature list or vector width read directly.
func isaUses(t *testing.T, fset *token.FileSet, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	at := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		out = append(out, filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line)+": "+what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec:
			return false // imports are checked by package
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && isaFeature.MatchString(s) {
				at(n, "ISA extension "+n.Value)
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Has" && len(n.Args) == 1 {
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					at(n, "feature query Has("+lit.Value+")")
				}
			}
		case *ast.SelectorExpr:
			if n.Sel.Name == "Features" || n.Sel.Name == "VectorBits" {
				at(n, "target field "+n.Sel.Name)
			}
		}
		return true
	})
	return out
}

func TestTargetNeutralKernelsKnowNoISA(t *testing.T) {
	mod, pkgs := listPackages(t)
	fset := token.NewFileSet()
	checked := 0
	for _, p := range pkgs {
		from, _ := rel(mod, p.ImportPath)
		if !matches(from, targetNeutral) || matches(from, isaAware) {
			continue
		}
		checked++
		for _, imps := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imps {
				if to, ok := rel(mod, imp); ok && matches(to, isaSpecific) {
					t.Errorf("%s is target-neutral and imports the ISA-specific package %s", from, to)
				}
			}
		}
		for _, files := range [][]string{p.GoFiles, p.TestGoFiles, p.XTestGoFiles} {
			for _, f := range files {
				for _, use := range isaUses(t, fset, filepath.Join(p.Dir, f)) {
					t.Errorf("%s is target-neutral: %s", from, use)
				}
			}
		}
	}
	if checked < 2 {
		t.Fatalf("checked %d target-neutral packages; kernels and kernels/ref at least are expected", checked)
	}
}

// TestISAUsesAreFound keeps the source check honest: each form it looks for is reported.
func TestISAUsesAreFound(t *testing.T) {
	src := `package k

import "github.com/kilnrt/kiln/target"

func f(t target.Target) int {
	if t.Has("avx512f") {
		return 16
	}
	_ = t.Features
	_ = map[string]int{"sse4.1": 4}
	return t.VectorBits / 32
}
`
	dir := t.TempDir()
	path := filepath.Join(dir, "k.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := isaUses(t, token.NewFileSet(), path)
	want := []string{
		`k.go:6: feature query Has("avx512f")`,
		`k.go:6: ISA extension "avx512f"`,
		`k.go:9: target field Features`,
		`k.go:10: ISA extension "sse4.1"`,
		`k.go:11: target field VectorBits`,
	}
	if len(got) != len(want) {
		t.Fatalf("found %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("use %d: %q, want %q", i, got[i], want[i])
		}
	}
}
