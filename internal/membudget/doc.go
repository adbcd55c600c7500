// Package membudget bounds the request bytes a server holds in memory at once, across
// protocols, and hands memory back to the operating system after a burst of large
// requests.
//
// Model: a Budget is a number of bytes. A request reserves bytes before it reads
// data into memory (Reserve waits, first come first served, until they are free or
// its context ends), and gives them back when the data is no longer held (Release).
// When the size of the data is only known once it has been read (a gRPC message, a
// chunked or compressed HTTP body), the request reserves the most it may read and
// shrinks the reservation to the real size afterwards (Shrink), so that what it then
// holds while it waits for an inference costs only its size. A reservation larger
// than the budget is cut to the whole budget: such a request runs alone.
//
// A nil *Budget bounds nothing (Reserve returns a nil *Reservation at once), and
// the methods of a nil *Reservation do nothing, so callers need no special case.
//
// Returning memory: Go's runtime keeps freed heap pages mapped and returns them to
// the operating system slowly (its background scavenger), and buffer pools (gRPC's
// among them, built on sync.Pool) keep large buffers alive until two garbage
// collections have passed, so after a burst of large requests the resident set stays
// high for minutes. With Options.ReleaseAfter set, once the reservations of at
// least that many bytes of large requests (those that held Options.LargeBytes or
// more after Shrink) have been released and the budget is nearly idle again (less
// than LargeBytes reserved), the budget runs two collections and
// debug.FreeOSMemory on a goroutine of its own, at most once per
// Options.ReleaseInterval (2 s by default; a release that comes too soon is done when
// the interval has passed, and the bytes of requests that end while a release runs get
// a release of their own after it). Small requests never trigger it, so a steady load of them costs no
// forced collection.
//
// Invariants: the bytes reserved never exceed the budget's size; Release is
// idempotent; Shrink never grows a reservation.
package membudget
