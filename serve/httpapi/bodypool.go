package httpapi

import (
	"math/bits"
	"sync"
)

// Pooled request bodies: an inference body of minPooled bytes or more is read into a
// buffer of a power-of-two class (plus bodySlack, room for the alignment pad), taken
// from that class's pool, so that a stream of large requests (an image model's
// 600 KB input) neither clears a fresh buffer per request nor feeds the garbage
// collector. The infer handler gives a buffer back only after the response is
// written and the inference succeeded: then nothing uses the tensors that alias it (a
// failed request's inputs may still be queued — a sequence step whose client gave up
// runs in its turn — so its buffer is left to the garbage collector). A recycled
// buffer is not cleared: a request sees only the bytes it read into it.
const (
	minPooledClass = 16 // 64 KiB: below it a fresh buffer costs little
	maxPooledClass = 28 // 256 MiB
	bodySlack      = binaryAlign
)

type bodyPool struct {
	classes [maxPooledClass + 1]sync.Pool // of *[]byte, len 0
}

// get returns a buffer of length 0 and capacity at least n, and whether it is pooled
// (nil, false: n is outside the pooled classes).
func (p *bodyPool) get(n int) ([]byte, bool) {
	k := bits.Len(uint(n - 1)) // the least k with 1<<k >= n
	if n <= 0 || k < minPooledClass || k > maxPooledClass {
		return nil, false
	}
	if b, ok := p.classes[k].Get().(*[]byte); ok {
		return *b, true
	}
	return make([]byte, 0, 1<<k+bodySlack), true
}

// put gives back a buffer get returned (whole: its start and full capacity).
func (p *bodyPool) put(b []byte) {
	k := bits.Len(uint(cap(b)-bodySlack)) - 1
	if k < minPooledClass || k > maxPooledClass || cap(b) != 1<<k+bodySlack {
		panic("BUG: httpapi: a buffer given back to the body pool is not one of its own")
	}
	b = b[:0]
	p.classes[k].Put(&b)
}
