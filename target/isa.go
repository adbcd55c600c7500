package target

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// ISAEnv is the environment variable that caps the instruction set Host reports: with
// it set to a Level, the features above that level are dropped, so that strategies,
// micro-kernels and journal keys are chosen as on a CPU of that level.
const ISAEnv = "KILN_CPU_ISA"

// Level is an x86 instruction-set level the host can be capped at.
type Level string

// The levels, widest first. Each keeps the features of the levels below it.
const (
	LevelAVX512  Level = "avx512"  // everything the CPU has
	LevelAVX2    Level = "avx2"    // no AVX-512: avx, avx2, fma and SSE4
	LevelSSE4    Level = "sse4"    // no AVX: sse4.1, sse4.2
	LevelGeneric Level = "generic" // the x86-64 baseline (SSE2): no listed feature
)

// Levels are the accepted values of ISAEnv, widest first.
var Levels = []Level{LevelAVX512, LevelAVX2, LevelSSE4, LevelGeneric}

// ErrUnknownLevel: ISAEnv names no Level, or caps a host that is not x86.
var ErrUnknownLevel = errors.New("unknown CPU instruction-set level")

// EnvLevel returns the cap ISAEnv sets ("" when unset or empty).
func EnvLevel() (Level, error) {
	v := strings.TrimSpace(os.Getenv(ISAEnv))
	if v == "" {
		return "", nil
	}
	for _, l := range Levels {
		if string(l) == v {
			if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
				return "", fmt.Errorf("%w: %s=%s caps x86 hosts; this host is %s", ErrUnknownLevel, ISAEnv, v, runtime.GOARCH)
			}
			return l, nil
		}
	}
	names := make([]string, len(Levels))
	for i, l := range Levels {
		names[i] = string(l)
	}
	return "", fmt.Errorf("%w: %s=%q, want one of %s", ErrUnknownLevel, ISAEnv, v, strings.Join(names, ", "))
}

// allows reports whether a CPU of level l has feature f. Only x86 features are
// capped; the empty level allows everything.
func (l Level) allows(f Feature) bool {
	s := string(f)
	switch l {
	case LevelAVX2:
		return !strings.HasPrefix(s, "avx512")
	case LevelSSE4:
		return !strings.HasPrefix(s, "avx") && s != "fma"
	case LevelGeneric:
		return !strings.HasPrefix(s, "avx") && s != "fma" && !strings.HasPrefix(s, "sse")
	}
	return true
}

// Capped returns t with the features above level l dropped (VectorBits follows).
func (t Target) Capped(l Level) Target {
	c := t
	c.Features = nil
	for _, f := range t.Features {
		if l.allows(f) {
			c.Features = append(c.Features, f)
		}
	}
	c.normalize()
	return c
}

// HostChecked describes the machine kiln runs on, capped at the level ISAEnv names; an
// unknown value is ErrUnknownLevel.
func HostChecked() (Target, error) {
	l, err := EnvLevel()
	if err != nil {
		return Target{}, err
	}
	return detectHost().Capped(l), nil
}
