// Package gputest opens the GPU devices tests run on: the default OpenCL device (PoCL
// on the CPU in CI) and CUDA GPU 0. A test without the device skips with the reason
// and how to install it; under KILN_REQUIRE_DATA=1 (CI) a missing OpenCL device fails
// the test instead, and under KILN_REQUIRE_GPU=1 a missing CUDA device does.
//
// Invariants: a device returned is closed when the test ends (a close error fails
// the test).
package gputest
