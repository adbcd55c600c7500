package onnx

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestLoadEveryTestModel loads every model file of the ONNX backend test data: each must
// load (and verify) or fail with a typed loader error; none may panic.
func TestLoadEveryTestModel(t *testing.T) {
	root := testdata.ONNXData(t)
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".onnx") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 1000 {
		t.Fatalf("found only %d models under %s", len(paths), root)
	}
	loaded, unsupported := 0, 0
	reasons := map[string]int{}
	for _, p := range paths {
		_, err := Load(p, Options{})
		switch {
		case err == nil:
			loaded++
		case errors.Is(err, ErrUnsupported):
			unsupported++
			var ue *UnsupportedOpError
			if errors.As(err, &ue) {
				reasons[ue.Op+": "+ue.Reason]++
			} else {
				reasons["other: "+firstLine(err)]++
			}
		case errors.Is(err, ErrInvalid):
			t.Errorf("%s: invalid: %v", rel(root, p), err)
		default:
			t.Errorf("%s: untyped error: %v", rel(root, p), err)
		}
	}
	t.Logf("%d models: %d loaded, %d unsupported", len(paths), loaded, unsupported)
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return reasons[keys[i]] > reasons[keys[j]] })
	for i, k := range keys {
		if i == 25 {
			break
		}
		t.Logf("  %4d  %s", reasons[k], k)
	}
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
