package modelrepo

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// TestScanListsOnlyServableVersions: in a repository with a symlink leading out of it,
// non-canonical and unusable version folders, an invalid folder name, a model without
// versions and a hidden folder, Scan lists the model folders inside the repository
// with their usable versions (newest first), and warns about the folders that look
// like models but are not.
func TestScanListsOnlyServableVersions(t *testing.T) {
	model := []byte("not read by the scanner")
	repo, _ := testdata.HostileRepository(t, model)
	for _, rel := range []string{"lenet/1/model.onnx", "lenet/7/model.onnx", "lenet/01/model.onnx", "lenet/+3/model.onnx",
		"bad\nname/1/model.onnx", "flat/model.onnx", ".hidden/1/model.onnx"} {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(repo, "lenet", "4", "model.onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "lenet", "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(repo, "lenet", "5", "model.onnx"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := Open(repo)
	if err != nil {
		t.Fatal(err)
	}
	ms, warnings, err := root.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		for _, v := range m.Versions {
			got = append(got, m.Name+"/"+filepath.Base(filepath.Dir(v.Path)))
		}
	}
	if want := []string{"lenet/7", "lenet/1", "mlp/1"}; !slices.Equal(got, want) {
		t.Errorf("Scan found %q, want %q", got, want)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{`"bad\nname"`, `model "flat"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q do not name %s", warnings, want)
		}
	}
	for _, name := range append([]string{""}, testdata.HostileModelNames...) {
		if _, err := root.ScanModel(name); !errors.Is(err, ErrUnknownModel) {
			t.Errorf("ScanModel(%q): %v, want ErrUnknownModel", name, err)
		}
	}
}

// TestDefaultModelFilenameNamesTheVersionsFile: a config's default_model_filename is
// the file each version folder must hold; ScanModelFile's file overrides it; a name
// with a directory part is not followed (model.onnx is looked for instead).
func TestDefaultModelFilenameNamesTheVersionsFile(t *testing.T) {
	repo := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("net/1/net.onnx", "")
	write("net/2/model.onnx", "")
	write("net/config.pbtxt", `default_model_filename: "net.onnx"`)
	write("up/1/model.onnx", "")
	write("up/config.pbtxt", `default_model_filename: "../1/model.onnx"`)
	root, err := Open(repo)
	if err != nil {
		t.Fatal(err)
	}
	m, err := root.ScanModel("net")
	if err != nil || len(m.Versions) != 1 || m.Versions[0].Path != filepath.Join(m.Dir, "1", "net.onnx") {
		t.Errorf("ScanModel(net) = %+v, %v; want version 1's net.onnx only", m.Versions, err)
	}
	m, err = root.ScanModelFile("net", "model.onnx")
	if err != nil || len(m.Versions) != 1 || m.Versions[0].Number != 2 {
		t.Errorf("ScanModelFile(net, model.onnx) = %+v, %v; want version 2 only", m.Versions, err)
	}
	m, err = root.ScanModel("up")
	if err != nil || len(m.Versions) != 1 || filepath.Base(m.Versions[0].Path) != "model.onnx" {
		t.Errorf("ScanModel(up) = %+v, %v; want model.onnx, the path in the config not followed", m.Versions, err)
	}
}
