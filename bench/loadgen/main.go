// Command loadgen measures kiln serve over loopback: it starts `kiln serve` on a
// temporary repository of zoo models, warms each model up (its compile goes to a
// temporary journal), then sends binary-tensor REST requests from C concurrent clients
// for a bounded time and count, and prints p50/p99 latency, throughput and errors per
// model and concurrency (the server logs at warn: no access log line per request). With
// --overhead it also runs `kiln bench` (in-process, same
// journal, so no compile) for the REST-binary p50 overhead at concurrency 1.
//
//	go run ./bench/loadgen [--zoo ../shared/zoo] [--models squeezenet1_1,bert_tiny]
//	    [--concurrency 1,8,32] [--duration 10s] [--max-requests 20000] [--seq 32]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kilnrt/kiln/bench/internal/zooreq"
)

type config struct {
	zoo, kiln, extra   string
	models             []string
	levels             []int
	duration           time.Duration
	maxRequests, seq   int
	threads, instances int
	overhead           bool
	rounds             int
	roundTime          time.Duration
	batchModel         string
	batchClients       int
	maxBatch           int
	queueDelay         time.Duration
}

func main() {
	var c config
	var models, levels string
	flag.StringVar(&c.zoo, "zoo", "../shared/zoo", "the zoo folder")
	flag.StringVar(&models, "models", "squeezenet1_1,bert_tiny", "comma-separated zoo models")
	flag.StringVar(&levels, "concurrency", "1,8,32", "comma-separated client counts")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "time per level")
	flag.IntVar(&c.maxRequests, "max-requests", 20000, "requests per level at most")
	flag.IntVar(&c.seq, "seq", 32, "sequence length of generated transformer inputs (token ids)")
	flag.IntVar(&c.threads, "threads", 2, "kiln serve --threads")
	flag.IntVar(&c.instances, "instances", 1, "kiln serve --instances")
	flag.StringVar(&c.extra, "serve-args", "", "more kiln serve arguments, space-separated")
	flag.BoolVar(&c.overhead, "overhead", true, "also time kiln bench in-process for the REST overhead")
	flag.IntVar(&c.rounds, "overhead-rounds", 9, "alternating REST / in-process rounds for the overhead (the median ratio is reported)")
	flag.DurationVar(&c.roundTime, "overhead-time", 2*time.Second, "time per overhead round, each side")
	flag.StringVar(&c.kiln, "kiln", "", "a built kiln binary (default: go build ./cmd/kiln)")
	flag.StringVar(&c.batchModel, "batching-model", "", "then compare dynamic batching off and on for this model (e.g. bert_tiny)")
	flag.IntVar(&c.batchClients, "batching-concurrency", 16, "clients for the batching comparison")
	flag.IntVar(&c.maxBatch, "max-batch", 16, "max_batch_size for the batching comparison")
	flag.DurationVar(&c.queueDelay, "queue-delay", 10*time.Millisecond, "max_queue_delay for the batching comparison (2 ms splits the 16 requests that arrive together after each batch; BENCHMARKS.md)")
	flag.Parse()
	c.models = strings.Split(models, ",")
	for _, l := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "loadgen: --concurrency %q\n", levels)
			os.Exit(2)
		}
		c.levels = append(c.levels, n)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	tmp, err := os.MkdirTemp("", "kiln-loadgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if c.kiln == "" {
		c.kiln = filepath.Join(tmp, "kiln")
		if out, err := exec.Command("go", "build", "-o", c.kiln, "./cmd/kiln").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	repo, journal := filepath.Join(tmp, "repo"), filepath.Join(tmp, "journal")
	for _, m := range c.models {
		src, err := filepath.Abs(filepath.Join(c.zoo, m, "model.onnx"))
		if err != nil {
			return err
		}
		if _, err := os.Stat(src); err != nil {
			return err
		}
		os.MkdirAll(filepath.Join(repo, m, "1"), 0o755)
		if err := os.Symlink(src, filepath.Join(repo, m, "1", "model.onnx")); err != nil {
			return err
		}
	}
	base, stop, err := startServer(c, repo, journal)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("machine: %s, %d cores; kiln serve --threads %d --instances %d; binary tensor data over loopback HTTP/1.1\n",
		cpuModel(), runtime.NumCPU(), c.threads, c.instances)
	fmt.Printf("%-14s %6s %9s %10s %10s %12s %7s\n", "model", "conc", "requests", "p50 ms", "p99 ms", "req/s", "errors")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	for _, m := range c.models {
		body, hdr, shapes, err := request(c, m)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := send(client, base, m, body, hdr); err != nil { // the compile
			return fmt.Errorf("%s: first request: %w", m, err)
		}
		fmt.Printf("%-14s first request (compile) %.2fs\n", m, time.Since(start).Seconds())
		for range 5 {
			send(client, base, m, body, hdr)
		}
		for _, n := range c.levels {
			r := level(client, base, m, body, hdr, n, c.duration, c.maxRequests)
			fmt.Printf("%-14s %6d %9d %10.3f %10.3f %12.1f %7d\n", m, n, r.count, r.p50, r.p99, r.rps, r.errors)
		}
		if c.overhead {
			// timings swing between runs here: alternate REST (concurrency 1) and the
			// in-process kiln bench in rounds and take the median of the ratios
			var ratios []float64
			var parts []string
			var inside []string
			for range c.rounds {
				n0, ns0 := computeStats(client, base, m)
				r := level(client, base, m, body, hdr, 1, c.roundTime, c.maxRequests)
				n1, ns1 := computeStats(client, base, m)
				b, err := inProcess(c, m, journal, shapes)
				if err != nil {
					return err
				}
				ratios = append(ratios, r.p50/b.P50)
				parts = append(parts, fmt.Sprintf("%.3f/%.3f", r.p50, b.P50))
				if n1 > n0 {
					inside = append(inside, fmt.Sprintf("%.3f/%.3f", float64(ns1-ns0)/float64(n1-n0)/1e6, b.Mean))
				}
			}
			slices.Sort(ratios)
			fmt.Printf("%-14s REST binary p50 / in-process kiln bench p50 in %d alternating rounds (ms): %s; median overhead %+.1f%%\n",
				m, c.rounds, strings.Join(parts, " "), 100*(ratios[len(ratios)/2]-1))
			fmt.Printf("%-14s mean compute inside the server (statistics) / in-process mean (ms): %s\n", m, strings.Join(inside, " "))
			// the part of the overhead that is the machine's: a request that does nothing,
			// sent after the server and client have been idle as long as an inference
			var gap time.Duration
			if r := level(client, base, m, body, hdr, 1, c.duration/4, 50); r.p50 > 0 {
				gap = time.Duration(r.p50 * float64(time.Millisecond))
			}
			if idle, err := idleRoundTrip(base, gap, 200); err == nil {
				fmt.Printf("%-14s a bare GET /v2/health/live after %.1f ms idle (as between inferences): p50 %.3f ms round trip\n", m, float64(gap)/1e6, idle)
			}
		}
	}
	if c.batchModel != "" {
		stop()
		return compareBatching(c, repo, journal, client)
	}
	return nil
}

// startServer starts kiln serve on a repository and returns its URL and a stop
// function (SIGTERM and wait; calling it twice is harmless).
func startServer(c config, repo, journal string) (string, func(), error) {
	args := []string{"serve", "--model-repository", repo, "--http-address", "127.0.0.1:0", "--cache-dir", journal,
		"--threads", fmt.Sprint(c.threads), "--instances", fmt.Sprint(c.instances), "--grpc-address", "", "--metrics-address", "", "--log-level", "warn"}
	if c.extra != "" {
		args = append(args, strings.Fields(c.extra)...)
	}
	srv := exec.Command(c.kiln, args...)
	srv.Stderr = io.Discard
	out, err := srv.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	var once sync.Once
	stop := func() { once.Do(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }) }
	base, err := serverURL(out)
	if err != nil {
		stop()
		return "", nil, err
	}
	return base, stop, nil
}

// compareBatching measures one model at --batching-concurrency clients with dynamic
// batching off (no config.pbtxt) and on (max_batch_size and dynamic_batching), each on
// a fresh server sharing the journal, and prints the throughput ratio.
func compareBatching(c config, repo, journal string, client *http.Client) error {
	m := c.batchModel
	body, hdr, _, err := request(c, m)
	if err != nil {
		return err
	}
	measure := func(label string) (result, error) {
		base, stop, err := startServer(c, repo, journal)
		if err != nil {
			return result{}, err
		}
		defer stop()
		if err := send(client, base, m, body, hdr); err != nil {
			return result{}, fmt.Errorf("%s: %w", m, err)
		}
		// warm-up at full concurrency: with batching, every batch size compiles here
		// (in the background on the server) before the measurement
		level(client, base, m, body, hdr, c.batchClients, 15*time.Second, 1<<30)
		before := batchStats(client, base, m)
		r := level(client, base, m, body, hdr, c.batchClients, c.duration, c.maxRequests)
		if after := batchStats(client, base, m); len(after) > 0 {
			var parts []string
			for _, size := range slices.Sorted(maps.Keys(after)) {
				if n := after[size] - before[size]; n > 0 {
					parts = append(parts, fmt.Sprintf("%d×%d", n, size))
				}
			}
			fmt.Printf("%-14s executions by batch size during the measurement: %s\n", m, strings.Join(parts, " "))
		}
		fmt.Printf("%-14s %6d %9d %10.3f %10.3f %12.1f %7d   dynamic batching %s\n", m, c.batchClients, r.count, r.p50, r.p99, r.rps, r.errors, label)
		return r, nil
	}
	cfgPath := filepath.Join(repo, m, "config.pbtxt")
	os.Remove(cfgPath)
	off, err := measure("off")
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("max_batch_size: %d\ndynamic_batching { max_queue_delay_microseconds: %d }\n", c.maxBatch, c.queueDelay.Microseconds())
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	defer os.Remove(cfgPath)
	on, err := measure(fmt.Sprintf("on (max_batch_size %d, queue delay %v)", c.maxBatch, c.queueDelay))
	if err != nil {
		return err
	}
	fmt.Printf("%-14s dynamic batching throughput ratio on/off at concurrency %d: %.2fx\n", m, c.batchClients, on.rps/off.rps)
	return nil
}

// batchStats reads the executions per batch size from the statistics extension.
func batchStats(client *http.Client, base, model string) map[int]int64 {
	resp, err := client.Get(base + "/v2/models/" + model + "/stats")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st struct {
		ModelStats []struct {
			BatchStats []struct {
				BatchSize    int `json:"batch_size"`
				ComputeInfer struct {
					Count int64 `json:"count"`
				} `json:"compute_infer"`
			} `json:"batch_stats"`
		} `json:"model_stats"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || len(st.ModelStats) == 0 {
		return nil
	}
	out := map[int]int64{}
	for _, b := range st.ModelStats[0].BatchStats {
		out[b.BatchSize] = b.ComputeInfer.Count
	}
	return out
}

// computeStats reads the model's successful compute count and nanoseconds.
func computeStats(client *http.Client, base, model string) (int64, int64) {
	resp, err := client.Get(base + "/v2/models/" + model + "/stats")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var st struct {
		ModelStats []struct {
			InferenceStats struct {
				ComputeInfer struct {
					Count int64 `json:"count"`
					Ns    int64 `json:"ns"`
				} `json:"compute_infer"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || len(st.ModelStats) == 0 {
		return 0, 0
	}
	ci := st.ModelStats[0].InferenceStats.ComputeInfer
	return ci.Count, ci.Ns
}

var servingLine = regexp.MustCompile(`on (http://[0-9.]+:[0-9]+)`)

// serverURL reads kiln serve's start-up message for its address.
func serverURL(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, r)
			return m[1], nil
		}
	}
	return "", fmt.Errorf("kiln serve exited before serving")
}

// request builds a binary-tensor request for the model's inputs: the zoo's test data,
// or for token-id inputs with a free sequence dim, random ids of length --seq.
func request(c config, model string) ([]byte, map[string]string, map[string][]int64, error) {
	r, err := zooreq.Build(filepath.Join(c.zoo, model), c.seq)
	if err != nil {
		return nil, nil, nil, err
	}
	return r.Body, r.Header, r.Shapes(), nil
}

func send(client *http.Client, base, model string, body []byte, hdr map[string]string) error {
	req, err := http.NewRequest("POST", base+"/v2/models/"+model+"/infer", bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

type result struct {
	count, errors int
	p50, p99, rps float64
}

// level runs n clients, each on its own persistent connection (rawConn), until the
// duration or the request count is reached.
func level(client *http.Client, base, model string, body []byte, hdr map[string]string, n int, d time.Duration, max int) result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var lat []float64
	errs, sent := 0, 0
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := newRawConn(base, "/v2/models/"+model+"/infer", body, hdr)
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
				return
			}
			defer rc.close()
			for ctx.Err() == nil {
				mu.Lock()
				if sent >= max {
					mu.Unlock()
					return
				}
				sent++
				mu.Unlock()
				t0 := time.Now()
				err := rc.do()
				ms := float64(time.Since(t0).Microseconds()) / 1000
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, ms)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	slices.Sort(lat)
	r := result{count: len(lat), errors: errs, rps: float64(len(lat)) / el}
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r
}

// benchResult is what loadgen reads of kiln bench --json.
type benchResult struct {
	P50  float64 `json:"p50_ms"`
	Mean float64 `json:"mean_ms"`
}

// inProcess runs kiln bench on the same journal (a hit: no compile) and returns its
// p50 and mean.
func inProcess(c config, model, journal string, shapes map[string][]int64) (benchResult, error) {
	var dims []string
	for _, s := range shapes {
		if len(s) == 2 && s[1] == int64(c.seq) {
			dims = []string{"--dims", fmt.Sprintf("batch=1,seq=%d", c.seq)}
		}
	}
	args := append([]string{"bench", filepath.Join(c.zoo, model, "model.onnx"), "--threads", fmt.Sprint(c.threads), "--json", "-q",
		"--cache-dir", journal, "--max-time", c.roundTime.String()}, dims...)
	if dims == nil {
		args = append(args, "--input-dir", filepath.Join(c.zoo, model, "test_data_set_0"))
	}
	var r benchResult
	out, err := exec.Command(c.kiln, args...).Output()
	if err != nil {
		return r, fmt.Errorf("kiln bench %s: %v", model, err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("kiln bench output %q: %v", out, err)
	}
	return r, nil
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
