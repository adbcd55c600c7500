package cpu

import "github.com/kilnrt/kiln/target"

// capFlags are the compiler flags that take away from -march=native what the ISA cap
// (target.ISAEnv) removes from the host's features, so that the C compiler generates
// code for the same instruction set the strategies were chosen for. Each flag also
// disables the extensions that depend on the one it names (with gcc and clang alike);
// the dependent ones kiln lists as features are named as well. Empty without a cap.
func capFlags(l target.Level) []string {
	noAVX := []string{"-mno-avx", "-mno-avx2", "-mno-fma", "-mno-f16c", "-mno-avx512f"}
	switch l {
	case target.LevelAVX2:
		return []string{"-mno-avx512f"}
	case target.LevelSSE4:
		return noAVX
	case target.LevelGeneric:
		return append(noAVX, "-mno-sse3", "-mno-ssse3", "-mno-sse4.1", "-mno-sse4.2", "-mno-sse4a")
	}
	return nil
}
