// Command coldwarm measures what the binary journal buys: for each model, the cold
// time-to-first-inference (a new `kiln run` process on an empty journal: compile,
// publish, run) and the warm one (a new process that finds the executable in the
// journal), end to end as wall time of the whole process, with the compile time the
// cold run reports. Warm runs repeat; the median is reported with the min and max.
//
//	go run ./bench/coldwarm [--zoo ../shared/zoo] [--models resnet18,bert_tiny] [--warm 7]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	zoo := flag.String("zoo", "../shared/zoo", "the zoo folder (<model>/model.onnx, <model>/test_data_set_0)")
	models := flag.String("models", "resnet18,bert_tiny", "comma-separated zoo models")
	warm := flag.Int("warm", 7, "warm runs per model")
	threads := flag.Int("threads", 2, "kiln --threads")
	kiln := flag.String("kiln", "", "a built kiln binary (default: go build ./cmd/kiln into a temporary folder)")
	flag.Parse()
	if err := run(*zoo, strings.Split(*models, ","), *warm, *threads, *kiln); err != nil {
		fmt.Fprintln(os.Stderr, "coldwarm:", err)
		os.Exit(1)
	}
}

// builtLine is kiln run's report of the journal lookup: outcome and time to executable.
var builtLine = regexp.MustCompile(`journal: \S+ (\w+) \(key \w+\) in (\S+)`)

func run(zoo string, models []string, warm, threads int, bin string) error {
	tmp, err := os.MkdirTemp("", "kiln-coldwarm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "kiln")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/kiln").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	fmt.Printf("machine: %s, %d cores; kiln --threads %d; %d warm runs per model\n", cpuModel(), runtime.NumCPU(), threads, warm)
	fmt.Printf("%-10s %12s %12s %14s %22s %8s\n", "model", "cold e2e", "cold compile", "warm e2e p50", "warm min..max", "ratio")
	for _, m := range models {
		dir := filepath.Join(tmp, "journal-"+m)
		model := filepath.Join(zoo, m, "model.onnx")
		if _, err := os.Stat(model); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		args := []string{"run", "--cache-dir", dir, "--threads", fmt.Sprint(threads), model, "--input-dir", filepath.Join(zoo, m, "test_data_set_0")}
		cold, stderr, err := timed(bin, args)
		if err != nil {
			return fmt.Errorf("%s cold: %v\n%s", m, err, stderr)
		}
		mm := builtLine.FindStringSubmatch(stderr)
		if mm == nil || mm[1] != "built" {
			return fmt.Errorf("%s cold run did not compile:\n%s", m, stderr)
		}
		coldCompile := mm[2]
		var ws []time.Duration
		for range warm {
			d, stderr, err := timed(bin, append(args, "-q"))
			if err != nil {
				return fmt.Errorf("%s warm: %v\n%s", m, err, stderr)
			}
			ws = append(ws, d)
		}
		// the warm runs were quiet; one more, verbose, proves they were hits
		_, stderr, _ = timed(bin, args)
		if mm := builtLine.FindStringSubmatch(stderr); mm == nil || mm[1] != "hit" {
			return fmt.Errorf("%s: the warm run was not a journal hit:\n%s", m, stderr)
		}
		slices.Sort(ws)
		p50 := ws[len(ws)/2]
		fmt.Printf("%-10s %12s %12s %14s %22s %7.1fx\n", m, ms(cold), coldCompile, ms(p50),
			ms(ws[0])+".."+ms(ws[len(ws)-1]), float64(cold)/float64(p50))
	}
	return nil
}

// timed runs kiln and returns the wall time of the whole process.
func timed(bin string, args []string) (time.Duration, string, error) {
	cmd := exec.Command(bin, args...)
	var se bytes.Buffer
	cmd.Stderr = &se
	start := time.Now()
	err := cmd.Run()
	return time.Since(start), se.String(), err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
