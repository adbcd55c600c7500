// Package safefile opens the files that untrusted configuration names: a model
// repository's model files, external data, configurations, warm-up samples. Model: a name
// from a model file, a configuration or a request is resolved under a root directory
// (symlinks followed), must stay inside that root, and must be a regular file; it is
// opened non-blocking, so a FIFO, a device or a socket planted where a model expects a
// file is refused at once instead of blocking a reader forever.
//
// Invariants: every function here either returns a regular file (or its bytes) inside
// the root it was given, or an error wrapping ErrNotRegular, ErrOutside or the
// underlying fs error; nothing is read past a caller's byte limit.
//
// References: open(2) (O_NONBLOCK on FIFOs and devices), path_resolution(7).
package safefile
