package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Machine describes where and with what the benchmark ran.
type Machine struct {
	// CPU is /proc/cpuinfo's "model name" with its family and model numbers.
	CPU string `json:"cpu"`
	// ISA lists the vector extensions /proc/cpuinfo reports (AVX2, FMA, AVX-512 parts).
	ISA string `json:"isa"`
	// Cores is the number of logical CPUs this process may use.
	Cores int `json:"cores"`
	// Kernel is the Linux release.
	Kernel string `json:"kernel,omitempty"`
	// Go is the toolchain that built the driver (and kiln, when the driver built it).
	Go string `json:"go"`
	// Node is `node --version`.
	Node string `json:"node,omitempty"`
	// ORT is the installed onnxruntime-node version.
	ORT string `json:"ort,omitempty"`
	// Kiln is `kiln version`.
	Kiln string `json:"kiln,omitempty"`
	// Commit is the module's git HEAD, when it can be read.
	Commit string `json:"commit,omitempty"`
	// LoadStart and LoadEnd are /proc/loadavg at the start and at the end of the run.
	LoadStart string `json:"load_start,omitempty"`
	// LoadEnd is /proc/loadavg at the end of the run.
	LoadEnd string `json:"load_end,omitempty"`
	// Start is when the run began (RFC 3339).
	Start string `json:"start"`
}

// isaFlags are the /proc/cpuinfo flags that decide which kernels the engines pick.
var isaFlags = []string{"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
	"avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile"}

// cpuInfo returns the first processor's "model name" (with "family F model M") and the
// vector extensions among its flags, from /proc/cpuinfo.
func cpuInfo() (model, isa string) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ")", ""
	}
	defer f.Close()
	var name, family, num string
	var flags []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if name != "" && flags != nil {
				break // end of the first processor
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && name == "":
			name = v
		case k == "cpu family" && family == "":
			family = v
		case k == "model" && num == "":
			num = v
		case (k == "flags" || k == "Features") && flags == nil:
			flags = strings.Fields(v)
		}
	}
	if name == "" {
		name = "unknown (" + runtime.GOARCH + ")"
	}
	if family != "" {
		name += fmt.Sprintf(" (family %s model %s)", family, num)
	}
	var have []string
	for _, fl := range isaFlags {
		if slices.Contains(flags, fl) {
			have = append(have, fl)
		}
	}
	if len(have) == 0 {
		return name, "none of " + strings.Join(isaFlags, " ")
	}
	if !slices.Contains(flags, "avx512f") {
		have = append(have, "(no AVX-512)")
	}
	return name, strings.Join(have, " ")
}

// readTrim returns a small file's trimmed content, or "" when it cannot be read.
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ortVersion reads the installed onnxruntime-node's package.json under ortDir.
func ortVersion(ortDir string) (string, error) {
	p := filepath.Join(ortDir, "node_modules", "onnxruntime-node", "package.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("onnxruntime-node is not installed (run `npm install` in %s): %w", ortDir, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("decoding %s: %w", p, err)
	}
	return pkg.Version, nil
}

// firstLine runs a short command and returns the first line of its output, or "".
func firstLine(ctx context.Context, dir, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stderr = io.Discard
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(l)
}

// print writes the machine block that heads the report.
func (m *Machine) print(w io.Writer) {
	fmt.Fprintf(w, "cpu:     %s\n", m.CPU)
	fmt.Fprintf(w, "isa:     %s\n", m.ISA)
	fmt.Fprintf(w, "cores:   %d\n", m.Cores)
	if m.Kernel != "" {
		fmt.Fprintf(w, "kernel:  %s\n", m.Kernel)
	}
	fmt.Fprintf(w, "go:      %s\n", m.Go)
	fmt.Fprintf(w, "node:    %s\n", orDash(m.Node))
	fmt.Fprintf(w, "ort:     onnxruntime-node %s\n", orDash(m.ORT))
	fmt.Fprintf(w, "kiln:    %s\n", orDash(m.Kiln))
	if m.Commit != "" {
		fmt.Fprintf(w, "commit:  %s\n", m.Commit)
	}
	fmt.Fprintf(w, "load:    %s\n", orDash(m.LoadStart))
	fmt.Fprintf(w, "start:   %s\n", m.Start)
}

// orDash returns s, or "-" for empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// userHZ is the unit of /proc/stat's counters (USER_HZ, 100 on every Linux port).
const userHZ = 100

// cpuTimes returns the machine's busy and stolen CPU seconds so far, summed over all
// CPUs, from /proc/stat's "cpu" line; ok is false where it cannot be read.
func cpuTimes() (busy, steal float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]float64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		v[i] = float64(n) / userHZ
	}
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[7], true
}
