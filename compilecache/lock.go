package compilecache

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// A build lock is a file locks/<key> created with O_EXCL, holding its owner and the
// expiry of its lease; the owner renews the lease (rewrites the file) every third of the
// lease while it builds. Another process treats the lock as stale, and takes it over,
// when the lease has expired, when the owner is a process on this host that no longer
// exists (a SIGKILLed compile frees its key at once), or when the lease ends further
// ahead than one lease duration and has not been renewed for one lease duration as seen
// by this process: such an expiry comes from a clock that is not ours (another host
// sharing the volume), so only the renewals the owner does are trusted, never its clock.
// A takeover is itself guarded by an O_EXCL file, so two waiters cannot both replace the
// same stale lock. GC removes the stale lock files nobody waits on (it judges a
// far-future lease by the file's modification time instead of by watching it).

const (
	// guardLimit is how old a takeover guard is before it counts as left by a killed
	// taker (a takeover takes a few instructions).
	guardLimit = 10 * time.Second
	// tornLockAge is how long an unreadable lock file counts as being written.
	tornLockAge = 2 * time.Second
)

type lockInfo struct {
	Owner   string    `json:"owner"` // host:pid:nonce
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Expires time.Time `json:"expires"`
}

type buildLock struct {
	path string
	info lockInfo
	stop chan struct{}
	done sync.WaitGroup
}

func (j *Journal) lockPath(k Key) string { return filepath.Join(j.dir, "locks", k.String()) }

// tryLock takes the build lock of k, or returns nil and the current holder when a live
// owner has it.
func (j *Journal) tryLock(k Key) (*buildLock, *lockInfo, error) {
	path := j.lockPath(k)
	for attempt := 0; attempt < 3; attempt++ {
		l, err := j.create(path)
		if err == nil {
			return l, nil, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, nil, err
		}
		cur, err := readLock(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		if err == nil && !j.stale(path, cur) {
			return nil, cur, nil
		}
		if err != nil { // unreadable: being written, or torn by a killed owner
			if st, e := os.Stat(path); e == nil && time.Since(st.ModTime()) < tornLockAge {
				return nil, &lockInfo{Owner: "(being written)"}, nil
			}
		}
		// stale or unreadable (a torn write by a killed owner): take it over
		if took, err := j.takeOver(path, cur); err != nil {
			return nil, nil, err
		} else if took != nil {
			return took, nil, nil
		}
	}
	cur, _ := readLock(path)
	return nil, cur, nil
}

func (j *Journal) create(path string) (*buildLock, error) {
	info := lockInfo{Owner: j.owner, Host: j.host, PID: os.Getpid(), Expires: time.Now().Add(j.opts.LeaseTTL)}
	data, _ := json.Marshal(info)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, j.perm.file)
	if err != nil {
		return nil, err
	}
	f.Chmod(j.perm.file) // past the umask: waiters of other users read it
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(path)
		return nil, fmt.Errorf("writing lock %s: %v %v", path, werr, cerr)
	}
	l := &buildLock{path: path, info: info, stop: make(chan struct{})}
	l.done.Add(1)
	go j.renew(l)
	return l, nil
}

// renew extends the lease every third of its length until release.
func (j *Journal) renew(l *buildLock) {
	defer l.done.Done()
	t := time.NewTicker(j.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			cur, err := readLock(l.path)
			if err != nil || cur.Owner != l.info.Owner {
				j.log.Warn("build lock lost (taken over as stale)", zapPath(l.path))
				return
			}
			l.info.Expires = time.Now().Add(j.opts.LeaseTTL)
			data, _ := json.Marshal(l.info)
			_ = writeAtomic(filepath.Dir(l.path), l.path, data, j.perm.file)
		}
	}
}

// release removes the lock if this process still owns it.
func (l *buildLock) release() {
	close(l.stop)
	l.done.Wait()
	if cur, err := readLock(l.path); err == nil && cur.Owner == l.info.Owner {
		os.Remove(l.path)
	}
}

func readLock(path string) (*lockInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var info lockInfo
	if err := json.Unmarshal(data, &info); err != nil || info.Owner == "" {
		return nil, fmt.Errorf("unreadable lock %s", path)
	}
	return &info, nil
}

// stale: the lease expired, or the owner is a dead process on this host, or the lease
// ends too far ahead and has not been renewed for a lease duration (path names the lock).
func (j *Journal) stale(path string, l *lockInfo) bool {
	now := time.Now()
	if now.After(l.Expires) {
		return true
	}
	if l.Host == j.host && l.PID > 0 && errors.Is(syscall.Kill(l.PID, 0), syscall.ESRCH) {
		return true
	}
	if l.Expires.Sub(now) <= j.opts.LeaseTTL {
		j.forgetLease(path)
		return false
	}
	return now.Sub(j.seenSince(path, l, now)) > j.opts.LeaseTTL
}

// leaseSeen is a far-future lease as this process first saw it.
type leaseSeen struct {
	owner   string
	expires time.Time
	since   time.Time
}

// seenSince returns when this process first saw the lock at path with l's owner and
// expiry (a renewal changes the expiry, and so starts a new observation).
func (j *Journal) seenSince(path string, l *lockInfo, now time.Time) time.Time {
	j.leaseMu.Lock()
	defer j.leaseMu.Unlock()
	if s, ok := j.leases[path]; ok && s.owner == l.Owner && s.expires.Equal(l.Expires) {
		return s.since
	}
	j.leases[path] = leaseSeen{owner: l.Owner, expires: l.Expires, since: now}
	return now
}

func (j *Journal) forgetLease(path string) {
	j.leaseMu.Lock()
	delete(j.leases, path)
	j.leaseMu.Unlock()
}

// takeOver replaces a stale lock (cur; nil when unreadable) with ours, under a guard
// file; it returns nil when someone else got there first.
func (j *Journal) takeOver(path string, cur *lockInfo) (*buildLock, error) {
	guard := path + ".takeover"
	g, err := os.OpenFile(guard, os.O_WRONLY|os.O_CREATE|os.O_EXCL, j.perm.file)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			// a taker killed inside its few instructions leaves the guard behind
			if st, err := os.Stat(guard); err == nil && time.Since(st.ModTime()) > guardLimit {
				os.Remove(guard)
			}
			return nil, nil
		}
		return nil, err
	}
	g.Close()
	defer os.Remove(guard)
	now, err := readLock(path)
	if errors.Is(err, os.ErrNotExist) {
		return j.create(path)
	}
	if err == nil && (cur == nil || now.Owner != cur.Owner || !j.stale(path, now)) {
		return nil, nil // renewed or replaced meanwhile
	}
	if err != nil && cur != nil {
		return nil, nil
	}
	what := "unreadable"
	if now != nil {
		what = fmt.Sprintf("owner %s, lease until %s", now.Owner, now.Expires.Format(time.RFC3339))
	}
	j.log.Info("taking over a stale build lock", zapPath(path), zapString("was", what))
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	j.forgetLease(path)
	l, err := j.create(path)
	if errors.Is(err, os.ErrExist) {
		return nil, nil
	}
	return l, err
}
