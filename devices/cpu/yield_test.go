package cpu

import (
	"testing"
	"time"
)

// TestYieldNowYieldsOncePerInterval: a launch yields (and records it) once the interval
// has passed since the last yield, and not again before the next interval.
func TestYieldNowYieldsOncePerInterval(t *testing.T) {
	old := int64(time.Since(yieldEpoch)) - 2*int64(yieldInterval)
	lastYield.Store(old)
	yieldNow()
	after := lastYield.Load()
	if after <= old {
		t.Fatalf("no yield %v after the last one", 2*yieldInterval)
	}
	fresh := int64(time.Since(yieldEpoch))
	lastYield.Store(fresh)
	yieldNow()
	again, elapsed := lastYield.Load(), time.Duration(int64(time.Since(yieldEpoch))-fresh)
	if again != fresh && elapsed < yieldInterval {
		t.Fatalf("yielded again %v after the last yield, within the %v interval", elapsed, yieldInterval)
	}
}
