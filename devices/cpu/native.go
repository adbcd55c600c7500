package cpu

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// -march=native asks the C compiler to target the CPU it runs on, so the flag alone does
// not say what object code may run on. resolveNative asks the compiler what it resolves
// to: run with -###, the driver prints the command line of its compiler proper without
// running it, where gcc lists the CPU (-march=, -mtune=), every ISA extension as -m<ext>
// or -mno-<ext> and the cache sizes (--param), and clang lists -target-cpu,
// -target-feature and -tune-cpu. That list, in the compiler's order, is the resolution.
// When the compiler prints none (another driver), the resolution names this CPU exactly
// instead: its model and a digest of every feature flag the kernel reports.

// A compiler that does not resolve -march=native in its -### output is asked to compile
// an empty file with it: a cross compiler (aarch64-linux-gnu-gcc on an x86 machine, as
// the arm64 tests under qemu-user use) refuses it, since it cannot describe the CPU it
// runs on as one it targets. Such a compiler builds for its own default target (the
// architecture's baseline), which names itself in its --version line: FindCompiler then
// leaves -march=native out.

// resolveNative returns what -march=native means to the compiler at path on this
// machine; ok is false when the compiler does not accept -march=native at all.
func resolveNative(path string) (native string, ok bool) {
	cmd := exec.Command(path, "-###", "-march=native", "-x", "c", "-c", os.DevNull, "-o", os.DevNull)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		if r, err := parseNative(out.String()); err == nil {
			return r, true
		}
	}
	if exec.Command(path, "-march=native", "-x", "c", "-c", os.DevNull, "-o", os.DevNull).Run() != nil {
		return "", false
	}
	return "cpu " + cpuModel() + " flags " + cpuFlagsDigest(), true
}

// errNoResolution: the -### output holds no compiler command line with a resolved target.
var errNoResolution = errors.New("no resolved -march=native in the compiler's output")

// parseNative picks the target options out of a driver's -### output.
func parseNative(out string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		words := splitCommand(sc.Text())
		var keep []string
		resolved := false
		for i := 0; i < len(words); i++ {
			w := words[i]
			switch {
			case w == "-march=native" || w == "-mtune=native" || w == "-mcpu=native":
			case w == "--param" && i+1 < len(words):
				keep = append(keep, w+" "+words[i+1])
				i++
			case (w == "-target-cpu" || w == "-tune-cpu" || w == "-target-feature") && i+1 < len(words):
				keep = append(keep, w+" "+words[i+1])
				resolved = resolved || w == "-target-cpu"
				i++
			case strings.HasPrefix(w, "-march=") || strings.HasPrefix(w, "-mcpu="):
				keep = append(keep, w)
				resolved = true
			case strings.HasPrefix(w, "-m") && w != "-mllvm":
				keep = append(keep, w)
			}
		}
		if resolved {
			return strings.Join(keep, " "), nil
		}
	}
	return "", errNoResolution
}

// splitCommand splits a -### line into words: words are separated by spaces, and a
// double-quoted word may hold spaces and backslash escapes.
func splitCommand(line string) []string {
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			if w, err := strconv.QuotedPrefix(line); err == nil {
				u, _ := strconv.Unquote(w)
				words = append(words, u)
				line = line[len(w):]
				continue
			}
		}
		w, rest, _ := strings.Cut(line, " ")
		words = append(words, w)
		line = rest
	}
	return words
}

// cpuFlagsDigest is a digest of the feature flags (x86 "flags", arm64 "Features") of the
// first CPU in /proc/cpuinfo.
func cpuFlagsDigest() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			if k = strings.TrimSpace(k); k == "flags" || k == "Features" {
				sum := sha256.Sum256([]byte(strings.TrimSpace(v)))
				return "sha256:" + hex.EncodeToString(sum[:8])
			}
		}
	}
	return "unknown"
}

// nativeSummary shortens a resolution for keys: the CPU it names (-march=, -mcpu= or
// -target-cpu), then the SHA-256 of the whole resolution.
func nativeSummary(native string) string {
	cpu := ""
	words := strings.Fields(native)
	for i, w := range words {
		switch {
		case strings.HasPrefix(w, "-march=") || strings.HasPrefix(w, "-mcpu="):
			cpu = w
		case w == "-target-cpu" && i+1 < len(words):
			cpu = w + " " + words[i+1]
		}
		if cpu != "" {
			break
		}
	}
	sum := sha256.Sum256([]byte(native))
	return strings.TrimSpace(cpu + " sha256:" + hex.EncodeToString(sum[:12]))
}
