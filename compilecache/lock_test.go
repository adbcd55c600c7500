package compilecache

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// writeLock leaves a build lock file as another process would.
func writeLock(t *testing.T, path string, info lockInfo, age time.Duration) {
	t.Helper()
	data, _ := json.Marshal(info)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-age)
	os.Chtimes(path, then, then)
}

// TestFarFutureLockIsTakenOverWithinItsLease: a lock from another host whose lease ends
// in 2999 (a clock far ahead, or a bogus file) and is never renewed is taken over within
// one lease duration of the waiter first seeing it, instead of blocking until it expires.
func TestFarFutureLockIsTakenOverWithinItsLease(t *testing.T) {
	ttl := 300 * time.Millisecond
	j, logs := openTest(t, t.TempDir(), Options{LeaseTTL: ttl, Poll: 10 * time.Millisecond})
	m := testMaterial("skew", "c")
	writeLock(t, j.lockPath(m.Key()), lockInfo{Owner: "far:1:1", Host: "another-host", PID: 1, Expires: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*ttl)
	defer cancel()
	start := time.Now()
	res, err := j.Do(ctx, m, "skew", func(context.Context) ([]byte, int, error) { return []byte("x"), 0, nil })
	if err != nil || res.Outcome != Built || !logged(logs, "taking over a stale build lock") {
		t.Fatalf("outcome %v err %v after %v", res.Outcome, err, time.Since(start))
	}
	t.Logf("taken over after %v (lease %v)", time.Since(start).Round(time.Millisecond), ttl)
}

// TestRenewedFarFutureLockIsHonoured: a far-future lease that its owner keeps renewing
// (a live builder on a host whose clock is ahead) is not taken over.
func TestRenewedFarFutureLockIsHonoured(t *testing.T) {
	ttl := 600 * time.Millisecond
	j, _ := openTest(t, t.TempDir(), Options{LeaseTTL: ttl, Poll: 10 * time.Millisecond})
	m := testMaterial("renewed", "c")
	path := j.lockPath(m.Key())
	info := lockInfo{Owner: "ahead:1:1", Host: "another-host", PID: 1, Expires: time.Now().Add(time.Hour)}
	writeLock(t, path, info, 0)
	for range 8 { // over two and a half lease durations
		if l, holder, err := j.tryLock(m.Key()); err != nil || l != nil {
			t.Fatalf("took a renewed lock (holder %v, err %v)", holder, err)
		}
		time.Sleep(ttl / 3)
		info.Expires = info.Expires.Add(ttl / 3)
		writeLock(t, path, info, 0)
	}
}

// TestGCRemovesStaleLocksAndDeadWorkDirs: cache gc removes lock files that a waiter would
// take over (expired, owner dead on this host, far-future and not renewed, torn) and old
// takeover guards, keeps a live lock; the work directory of a SIGKILLed process is
// removed when a writer opens the cache, a live process's is kept.
func TestGCRemovesStaleLocksAndDeadWorkDirs(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{LeaseTTL: time.Second})
	key := func(s string) string { return j.lockPath(testMaterial(s, "c").Key()) }
	far := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	writeLock(t, key("expired"), lockInfo{Owner: "a", Host: "h", PID: 1, Expires: time.Now().Add(-time.Minute)}, time.Minute)
	writeLock(t, key("dead"), lockInfo{Owner: "b", Host: j.host, PID: 99999999, Expires: far}, 0)
	writeLock(t, key("far"), lockInfo{Owner: "c", Host: "h", PID: 1, Expires: far}, time.Minute)
	os.WriteFile(key("torn"), []byte(`{"own`), 0o644)
	os.Chtimes(key("torn"), time.Now().Add(-time.Minute), time.Now().Add(-time.Minute))
	os.WriteFile(key("guard")+".takeover", nil, 0o644)
	os.Chtimes(key("guard")+".takeover", time.Now().Add(-time.Minute), time.Now().Add(-time.Minute))
	live, err := j.create(key("live"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.release()
	writeLock(t, key("renewed"), lockInfo{Owner: "d", Host: "h", PID: 1, Expires: far}, 0)

	rep, err := j.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "locks", "*"))
	if rep.StaleLocks != 5 || len(left) != 2 {
		t.Fatalf("removed %d stale locks; left %v", rep.StaleLocks, left)
	}
	for _, p := range []string{key("live"), key("renewed")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
	}

	tmp := j.TempDir()
	dead, deadDir := claimInChild(t, tmp)
	_, liveDir := claimInChild(t, tmp)
	os.WriteFile(filepath.Join(deadDir, "kernels.c"), []byte("int x;"), 0o600)
	dead.Process.Signal(syscall.SIGKILL)
	dead.Wait()
	j2, logs := openTest(t, dir, Options{})
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatalf("the dead process's work directory survived the open: %v", err)
	}
	if _, err := os.Stat(liveDir); err != nil || !logged(logs, "removed work directories") {
		t.Fatalf("the live process's work directory: %v", err)
	}
	j2.Close()
}
