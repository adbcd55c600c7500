package testdata

import "strings"

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
