//go:build !linux

package vm

// physicalMemory is unknown here: SystemMemory falls back to a small machine's.
func physicalMemory() int64 { return 0 }
