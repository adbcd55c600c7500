// Package target describes what kiln compiles for, as plain data: the kind of device, the
// instruction-set features, core count, and (later) GPU limits. It is a value type with a
// stable text form so that it can be part of cache keys; nothing here probes devices
// except Host, which reads the CPU features of this machine through golang.org/x/sys/cpu.
//
// Invariants: Features are sorted and unique; Fingerprint is deterministic for equal
// targets.
package target
