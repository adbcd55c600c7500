package compilecache

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnrt/kiln/internal/workdir"
)

// helperEnv makes the test binary a helper process: it opens the journal in
// $KILN_HELPER_DIR with policy $KILN_HELPER_POLICY, gets testMaterial($KILN_HELPER_MODEL,
// "c") and prints "hit <bytes> <policy>" or "miss <error>"; an Open error prints "open
// <error>". Tests run it as another user to see the cache as that user does.
const helperEnv = "KILN_COMPILECACHE_HELPER"

func TestMain(m *testing.M) {
	if base := os.Getenv(claimEnv); base != "" {
		os.Exit(claimMain(base))
	}
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain(os.Stdout))
	}
	os.Exit(m.Run())
}

// claimEnv makes the test binary claim a work directory in $KILN_COMPILECACHE_CLAIM,
// print its path and wait (until killed, or its stdin closes).
const claimEnv = "KILN_COMPILECACHE_CLAIM"

func claimMain(base string) int {
	d, err := workdir.Claim(base, "cc-", 0o755)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println(d.Path)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// claimInChild starts a process that claims a work directory in base, and returns it
// and the directory.
func claimInChild(t *testing.T, base string) (*exec.Cmd, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), claimEnv+"="+base)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "error") {
		t.Fatalf("child: %q %v", line, err)
	}
	return cmd, strings.TrimSpace(line)
}

func helperMain(w io.Writer) int {
	j, err := Open(Options{Dir: os.Getenv("KILN_HELPER_DIR"), Policy: Policy(os.Getenv("KILN_HELPER_POLICY"))})
	if err != nil {
		fmt.Fprintf(w, "open %v\n", err)
		return 0
	}
	defer j.Close()
	b, err := j.Get(testMaterial(os.Getenv("KILN_HELPER_MODEL"), "c"))
	if err != nil {
		fmt.Fprintf(w, "miss %v\n", err)
		return 0
	}
	fmt.Fprintf(w, "hit %d %s\n", b.Len(), j.Policy())
	return 0
}

// otherUID is the user a root test runs the helper as.
const otherUID = 65534

// sharedTempDir is a temporary directory (mode 0755) that another user can enter.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kiln-cache-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// asOtherUser runs the helper on dir as uid otherUID (the test must run as root) and
// returns its line.
func asOtherUser(t *testing.T, shared, dir string, policy Policy, model string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// the test binary's own directory is private to root: run a copy
	exe := filepath.Join(shared, "helper.test")
	if _, err := os.Stat(exe); err != nil {
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "KILN_HELPER_DIR="+dir, "KILN_HELPER_POLICY="+string(policy), "KILN_HELPER_MODEL="+model)
	cmd.Dir = shared
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid %d: %v\n%s", otherUID, err, out)
	}
	return strings.TrimSpace(string(out))
}

// treeState lists every file and directory under dir with its mode, size and
// modification time, to show that nothing was written.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %d\n", strings.TrimPrefix(p, dir), info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
