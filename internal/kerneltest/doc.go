// Package kerneltest compiles loopir functions for the CPU and runs them on float32 data,
// and evaluates single graph ops on the reference evaluator, so that tests of schedules
// and compute definitions can compare the two in a few lines.
package kerneltest
