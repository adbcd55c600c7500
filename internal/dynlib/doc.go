// Package dynlib opens native libraries at run time for the devices bound through purego
// (devices/cuda, devices/opencl): a candidate list built from an environment variable,
// sonames the dynamic loader resolves and folders where vendors install, tried in order;
// symbol tables resolved in one step; C strings. A library that does not load is an
// error listing every attempt with the loader's message, which the device wraps in
// devices.ErrUnavailable.
//
// Invariants: nothing here is cached or global: each device opens what it needs.
package dynlib
