package membudget

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestReserveWaitsUntilBytesAreFree(t *testing.T) {
	b := New(100, Options{})
	r1, err := b.Reserve(context.Background(), 80)
	if err != nil || r1.Bytes() != 80 || b.InUse() != 80 {
		t.Fatalf("first reservation: %v, %d bytes, %d in use", err, r1.Bytes(), b.InUse())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, 40); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("40 bytes with 20 free: %v, want a deadline error", err)
	}
	got := make(chan *Reservation)
	go func() {
		r, _ := b.Reserve(context.Background(), 40)
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("40 bytes reserved while only 20 were free")
	case <-time.After(20 * time.Millisecond):
	}
	r1.Shrink(50) // the data turned out to be 50 bytes
	r2 := <-got
	if r1.Bytes() != 50 || r2.Bytes() != 40 || b.InUse() != 90 {
		t.Fatalf("after Shrink: %d + %d bytes, %d in use", r1.Bytes(), r2.Bytes(), b.InUse())
	}
	r1.Shrink(70) // never grows
	if r1.Bytes() != 50 {
		t.Fatalf("Shrink grew the reservation to %d", r1.Bytes())
	}
	blocked := make(chan struct{})
	go func() { // a waiter for more than is free
		close(blocked)
		r, _ := b.Reserve(context.Background(), 100)
		r.Release()
	}()
	<-blocked
	time.Sleep(10 * time.Millisecond)
	soon, cancelSoon := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelSoon()
	if r0, err := b.Reserve(soon, 0); err != nil || r0.Bytes() != 0 {
		t.Fatalf("an empty reservation behind a waiter: %v", err)
	}
	r1.Release()
	r1.Release()
	r2.Release()
	if b.InUse() != 0 {
		t.Fatalf("%d bytes in use after every release", b.InUse())
	}
}

func TestReservationLargerThanTheBudgetTakesAllOfIt(t *testing.T) {
	b := New(100, Options{})
	r, err := b.Reserve(context.Background(), 1000)
	if err != nil || r.Bytes() != 100 {
		t.Fatalf("1000 bytes of 100: %v, %d bytes", err, r.Bytes())
	}
	r.Release()
}

func TestNilBudgetBoundsNothing(t *testing.T) {
	var b *Budget
	r, err := b.Reserve(context.Background(), 1<<40)
	if err != nil || r != nil || b.InUse() != 0 || b.Size() != 0 {
		t.Fatalf("nil budget: %v %v", r, err)
	}
	r.Shrink(1)
	r.Release()
}

// TestLargeRequestsReturnMemoryOnceIdle: memory is returned once enough large
// requests are done and the budget is nearly idle, not while a large one still
// runs, never for small ones, and at most once per interval.
func TestLargeRequestsReturnMemoryOnceIdle(t *testing.T) {
	var calls atomic.Int32
	b := New(1000, Options{LargeBytes: 10, ReleaseAfter: 30, ReleaseInterval: 200 * time.Millisecond, FreeOSMemory: func() { calls.Add(1) }})
	reserve := func(n int64) *Reservation {
		r, err := b.Reserve(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitCalls := func(want int32, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for calls.Load() < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := calls.Load(); got != want {
			t.Fatalf("%d returns, want %d", got, want)
		}
	}
	for range 100 { // small requests: never
		reserve(5).Release()
	}
	a := reserve(1000)
	a.Shrink(20) // large after Shrink
	c, d := reserve(20), reserve(20)
	a.Release()
	c.Release() // 40 bytes owed, but d (large) still runs
	time.Sleep(30 * time.Millisecond)
	waitCalls(0, 0)
	d.Release()
	waitCalls(1, time.Second)
	start := time.Now()
	for range 2 {
		reserve(20).Release()
	}
	waitCalls(2, time.Second)
	if since := time.Since(start); since < 150*time.Millisecond {
		t.Fatalf("second return %v after the first, want about the 200 ms interval", since)
	}
	reserve(5).Release() // a small request after a burst owes nothing new
	time.Sleep(250 * time.Millisecond)
	waitCalls(2, 0)
}

// TestReturnDueDuringARequestWaitsForItsEnd: a burst of large requests that arrive
// one after another (each waits for the previous one's bytes) gets its memory back
// when its last request is done, not an interval later, even when the return
// scheduled by an earlier request fell due while the last one still ran.
func TestReturnDueDuringARequestWaitsForItsEnd(t *testing.T) {
	var calls atomic.Int32
	const interval = 300 * time.Millisecond
	b := New(100, Options{LargeBytes: 10, ReleaseAfter: 20, ReleaseInterval: interval, FreeOSMemory: func() { calls.Add(1) }})
	hold := func(d time.Duration) {
		r, err := b.Reserve(context.Background(), 50)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		r.Release()
	}
	hold(0)
	hold(0) // owed 100: returned at once (no return yet)
	deadline := time.Now().Add(time.Second)
	for calls.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d returns after the first requests, want 1", calls.Load())
	}
	hold(0)
	hold(0)                               // owed again: a return is scheduled for the end of the interval...
	hold(interval + 100*time.Millisecond) // ...and falls due while this request runs
	end := time.Now()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d returns while the last request ran, want 1 (none while it holds its bytes)", n)
	}
	for calls.Load() < 2 && time.Since(end) < 2*interval {
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d returns, want 2", calls.Load())
	}
	if took := time.Since(end); took > interval/2 {
		t.Fatalf("memory returned %v after the last request ended, want at once", took)
	}
}

// TestRequestEndingDuringAReturnGetsItsOwn: a large request that ends while a return of
// memory runs (the return was pending, so its end scheduled none) is returned after it,
// within the interval, without another request to trigger it.
func TestRequestEndingDuringAReturnGetsItsOwn(t *testing.T) {
	var calls atomic.Int32
	running, finish := make(chan struct{}, 1), make(chan struct{})
	free := func() {
		if calls.Add(1) == 1 {
			running <- struct{}{}
			<-finish
		}
	}
	b := New(100, Options{LargeBytes: 10, ReleaseAfter: 20, ReleaseInterval: 100 * time.Millisecond, FreeOSMemory: free})
	reserve := func() *Reservation {
		r, err := b.Reserve(context.Background(), 20)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reserve().Release()
	<-running // the first return runs
	reserve().Release()
	close(finish)
	deadline := time.Now().Add(2 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d returns, want 2: the request that ended during the first was never returned", got)
	}
}
