package opencl

// gostring is the bytes of b up to its first NUL (all of b when it has none).
func gostring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
