package devices

import (
	"errors"
	"fmt"
	"testing"
)

// TestLaunchedNamesEachKernelOnceAndIsCapped: the names come once each, in launch order,
// at most MaxLaunched with an ellipsis, and Take forgets them.
func TestLaunchedNamesEachKernelOnceAndIsCapped(t *testing.T) {
	var l Launched
	if got := l.Take(); got != "(none launched since the last Sync)" {
		t.Errorf("empty: %q", got)
	}
	l.Add("a")
	l.Add("b")
	l.Add("a")
	if got := l.Take(); got != "a, b" {
		t.Errorf("got %q", got)
	}
	for i := range MaxLaunched + 5 {
		l.Add(fmt.Sprint("k", i))
	}
	if got := l.Take(); got[len(got)-5:] != ", ..." {
		t.Errorf("capped: %q", got)
	}
	if got := l.Take(); got != "(none launched since the last Sync)" {
		t.Errorf("after Take: %q", got)
	}
}

func TestStatusError(t *testing.T) {
	if err := StatusError("k", [3]int64{}); err != nil {
		t.Fatalf("code 0: %v", err)
	}
	err := StatusError("k", [3]int64{KernelIndexOutOfRange, 9, 6})
	var ke *KernelError
	if !errors.As(err, &ke) || !errors.Is(err, ErrLaunch) || ke.Code != KernelIndexOutOfRange || ke.Detail != [2]int64{9, 6} || ke.Kernel != "k" {
		t.Fatalf("got %#v", err)
	}
}
