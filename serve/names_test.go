package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnrt/kiln/internal/testdata"
)

// hostileNames adds the empty name, which only the service API can receive.
var hostileNames = append([]string{""}, testdata.HostileModelNames...)

// watchOpens reports every open or read under dir (inotify), so a test can prove that
// nothing outside the repository was touched.
func watchOpens(t *testing.T, paths ...string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	for _, p := range paths {
		if _, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN|unix.IN_ACCESS); err != nil {
			t.Fatalf("inotify watch %s: %v", p, err)
		}
	}
	return func() int {
		buf := make([]byte, 64<<10)
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			return 0
		}
		return n / unix.SizeofInotifyEvent // at least one event per record
	}
}

// TestHostileModelNamesGetOneRefusal: forty hostile names through every entry point of
// the service get the same refusal; the decoy model beside the repository (reachable
// by a traversal or by a symlink inside the repository) is never opened.
func TestHostileModelNamesGetOneRefusal(t *testing.T) {
	if len(hostileNames) < 40 {
		t.Fatalf("%d hostile names", len(hostileNames))
	}
	repo, x, _ := testRepo(t)
	outside := t.TempDir()
	decoy := filepath.Join(outside, "evil", "1")
	src, err := os.ReadFile("../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "model.onnx"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(outside, "evil"), filepath.Join(repo, "evil-link"))
	os.Symlink(filepath.Join(decoy, "model.onnx"), filepath.Join(repo, "file-link"))
	opened := watchOpens(t, outside, filepath.Join(outside, "evil"), decoy, filepath.Join(decoy, "model.onnx"))

	s := openServiceWith(t, repo, t.TempDir(), Options{RepositoryControl: true, Load: []string{"mlp"}})
	want := errBadName.Error()
	for _, name := range hostileNames {
		calls := map[string]error{
			"load":   s.LoadModel(name),
			"unload": s.UnloadModel(name),
		}
		req := request(x)
		req.Model = name
		_, calls["infer"] = s.Infer(context.Background(), req)
		_, calls["metadata"] = s.ModelMetadata(name, "")
		_, calls["ready"] = s.ModelReady(name, "")
		_, calls["config"] = s.ModelConfig(name, "")
		if name != "" { // "" asks for every model's statistics
			_, calls["stats"] = s.Stats(name, "")
		}
		for call, err := range calls {
			if err == nil || err.Error() != want || !errors.Is(err, ErrNotFound) {
				t.Errorf("%s(%q): %v, want the refusal %q", call, name, err, want)
			}
		}
	}
	for _, st := range s.Index() {
		if !ValidModelName(st.Name) || strings.Contains(st.Name, "evil") {
			t.Errorf("the index lists %q", st.Name)
		}
	}
	if n := opened(); n > 0 {
		t.Fatalf("%d opens or reads outside the repository", n)
	}
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatalf("the real model after the hostile names: %v", err)
	}
	if _, err := os.ReadFile(filepath.Join(decoy, "model.onnx")); err != nil || opened() == 0 {
		t.Fatalf("the watch does not see an open of the decoy (%v)", err)
	}
}

func TestVersionsAreCanonicalDecimals(t *testing.T) {
	for s, ok := range map[string]bool{"1": true, "0": true, "12": true, "01": false, "+1": false, "-1": false, "1e3": false, "": false, " 1": false} {
		if _, got := parseVersion(s); got != ok {
			t.Errorf("parseVersion(%q) = %v", s, got)
		}
	}
}

// TestWarmupFileStaysInItsFolder: warm-up data named by config.pbtxt is read only from
// the model's warmup/ folder: a symlink there that leads out makes the model
// UNAVAILABLE with the reason, and the file outside is never opened; a FIFO is refused
// without blocking.
func TestWarmupFileStaysInItsFolder(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			repo, _, _ := testRepo(t)
			outside := t.TempDir()
			secret := filepath.Join(outside, "secret.bin")
			if err := os.WriteFile(secret, make([]byte, 3*8*4), 0o644); err != nil {
				t.Fatal(err)
			}
			warm := filepath.Join(repo, "mlp", "warmup")
			os.MkdirAll(warm, 0o755)
			if kind == "symlink" {
				os.Symlink(secret, filepath.Join(warm, "x.bin"))
			} else if err := unix.Mkfifo(filepath.Join(warm, "x.bin"), 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			opened := watchOpens(t, outside, secret)
			writeConfig(t, repo, "mlp", `
model_warmup [ { name: "file" inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 3, 8 ] input_data_file: "x.bin" } } } ]
`)
			s := openService(t, repo, t.TempDir())
			waitSettled(t, s, time.Minute)
			for _, st := range s.Index() {
				if st.Name == "mlp" && (st.State != StateUnavailable || !strings.Contains(st.Reason, "x.bin")) {
					t.Fatalf("warm-up data through a %s: %+v", kind, st)
				}
			}
			if n := opened(); n > 0 {
				t.Fatalf("%d opens outside the repository", n)
			}
		})
	}
}
