package testdata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// HostileModelNames are model names a client may send: traversals in every spelling,
// absolute paths, separators, control characters, invalid UTF-8, hidden folders, a
// name too long for a file system, and (when a test creates them) "evil-link" and
// "file-link", symlinks inside a repository that lead out of it. None names a model.
var HostileModelNames = []string{
	"..", ".", "../evil", "../../evil", "../../../evil", "mlp/../../../evil", "mlp/..", "mlp/../evil",
	"./mlp", "mlp/", "mlp/1", "mlp/1/model.onnx", "/", "/etc", "/etc/passwd", "/tmp/evil",
	`..\evil`, `mlp\..\..\evil`, `\\server\share`, "%2E%2E", "..%2F..%2Fevil", "%2e%2e%2fevil",
	"mlp\x00", "\x00", "mlp\x00../../evil", "a\nb", "mlp\r\n", "\x1b[31mred", "mlp\x7f",
	"\xff\xfe", "mlp\xc0\xaf..", ".hidden", ".git", "..." + strings.Repeat("a", 10),
	strings.Repeat("a", 256), "evil-link", "file-link", "\u0085evil", "mlp\u2028", "~/../evil",
}

// HostileRepository lays out a model repository holding model as mlp/1/model.onnx, and
// beside it a decoy copy (<root>/evil/1/model.onnx) that the symlinks "evil-link" (a
// model folder) and "file-link" (a file) inside the repository lead to. It returns the
// repository and the decoy's folder.
func HostileRepository(t testing.TB, model []byte) (repo, decoy string) {
	t.Helper()
	root := t.TempDir()
	repo, decoy = filepath.Join(root, "repo"), filepath.Join(root, "evil")
	for _, dir := range []string{filepath.Join(repo, "mlp", "1"), filepath.Join(decoy, "1")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.onnx"), model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"evil-link": decoy, "file-link": filepath.Join(decoy, "1", "model.onnx")} {
		if err := os.Symlink(target, filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	return repo, decoy
}
