package vm

import "syscall"

// physicalMemory is the machine's RAM (sysinfo), or 0 when it cannot be read.
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
