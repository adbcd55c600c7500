//go:build linux

// Command httpfloor measures what answering one request over loopback costs on this
// machine before any inference server code runs: the floor under loadgen's "REST binary
// p50 over in-process kiln bench" overhead. Every server does the same fixed work per
// request — kiln_floor_compute (csrc/compute.c): the calling thread and one helper thread
// that idles like kiln's pool worker read --footprint bytes over and over as an inference
// streams its weights, for as many passes as take --compute back to back (calibrated on
// the server's first request; --compute-as time: for --compute by the clock) — and returns a
// --response-bytes body; one C client (csrc/client.c) times round trips at concurrency 1
// over a keep-alive connection. The servers:
//
//	c         csrc/server.c: blocking sockets, no Go runtime
//	go-tcp    a goroutine per connection on raw TCP, one Write per response
//	net/http  net/http with kiln's corked binary response (what gin runs on)
//	net/http (by the clock)
//	          the same server with its compute lasting --compute whatever the caches
//	          hold (with --compute-as work, the default: the two floors side by side)
//
// Why fixed work: an inference served right after a request landed its body and the
// server's code ran is slower than one of back-to-back inferences (caches and cores
// left cold), and a compute by the clock cannot be: it ends on time whatever the
// request left behind, so it under-states what serving over HTTP costs.
//
// Rounds alternate the servers; the report gives each one's p50 per round, the median
// over rounds and the median overhead over the compute time.
//
// With --kiln BIN --model ZOO/MODEL the same run also measures kiln itself: each round
// times the model in process (`kiln bench` on the server's journal entry), then kiln
// serve's REST endpoint with the same C client and the model's binary-extension request,
// then its gRPC endpoint (a Go client), and runs the floor servers with that round's
// in-process p50 as their compute and the model's request and response sizes. The report
// sets kiln's REST overhead over in process beside net/http's over its compute. With
// --kiln-before OLD, a second kiln serve (OLD, on its own journal) has its REST endpoint
// timed in each round right after the first's: a before/after comparison in one run.
//
//	go run ./bench/httpfloor [--rounds 5] [--requests 1000] [--compute 3ms]
//	go run ./bench/httpfloor --kiln ./kiln --model $KILN_ZOO/bert_tiny [--seq 32] [--threads 2] [--kiln-before ./kiln-main]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "embed"
)

//go:embed csrc/compute.c
var computeC []byte

//go:embed csrc/server.c
var serverC []byte

//go:embed csrc/client.c
var clientC []byte

type config struct {
	rounds, requests, requestBytes, responseBytes int
	footprint                                     int
	compute                                       time.Duration
	cc                                            string
	kiln, model                                   string // measure kiln serve on this zoo model too
	kilnBefore                                    string // and this kiln binary's REST beside it (a before/after comparison)
	seq, threads                                  int
	computeAs                                     string // "work" or "time"
}

var servers = []string{"c", "go-tcp", "net/http"}

// clockFloor is net/http with its compute by the clock, measured beside the fixed-work
// floors with --compute-as work.
const clockFloor = "net/http (by the clock)"

// floorServers are the floors a run measures.
func floorServers(c config) []string {
	if c.computeAs == "work" {
		return append(slices.Clone(servers), clockFloor)
	}
	return servers
}

func main() {
	var c config
	role := flag.String("serve", "", "internal: run one Go server (go-tcp or net/http) on --listen")
	listen := flag.String("listen", "", "internal: the Go server's address")
	lib := flag.String("lib", "", "internal: the compute shared object")
	flag.IntVar(&c.rounds, "rounds", 5, "alternating rounds over the servers")
	flag.IntVar(&c.requests, "requests", 1000, "timed requests per server per round (after 50 untimed)")
	flag.DurationVar(&c.compute, "compute", 3*time.Millisecond, "busy time per request on two threads (bert_tiny s32 takes ~3.2 ms here)")
	flag.StringVar(&c.computeAs, "compute-as", "work", "work: each request does the work that takes --compute back to back; time: each request's compute lasts --compute")
	flag.IntVar(&c.requestBytes, "request-bytes", 1296, "request body size (bert_tiny s32's binary request is 1296 bytes with headers)")
	flag.IntVar(&c.responseBytes, "response-bytes", 33792, "response body size (bert_tiny s32's two outputs: 33792 bytes)")
	flag.IntVar(&c.footprint, "footprint", -1, "bytes the compute reads per request, as a model streams its weights (-1: with --kiln the model file's size, else 0: the compute only pauses and the server's code stays cached)")
	flag.StringVar(&c.cc, "cc", "cc", "the C compiler")
	flag.StringVar(&c.kiln, "kiln", "", "a kiln binary: measure kiln serve and kiln bench on --model in the same run")
	flag.StringVar(&c.model, "model", "", "with --kiln, a zoo model folder (model.onnx, test_data_set_0)")
	flag.StringVar(&c.kilnBefore, "kiln-before", "", "with --kiln, another kiln binary (e.g. built from main) whose REST endpoint is timed in each round too, on its own journal")
	flag.IntVar(&c.seq, "seq", 32, "with --kiln, the length of int64 token inputs")
	flag.IntVar(&c.threads, "threads", 2, "with --kiln, kiln's threads (in process and served)")
	flag.Parse()
	if c.computeAs != "work" && c.computeAs != "time" {
		fmt.Fprintf(os.Stderr, "httpfloor: --compute-as %q: want work or time\n", c.computeAs)
		os.Exit(2)
	}
	if *role != "" {
		if err := serveGo(*role, *listen, *lib, c); err != nil {
			fmt.Fprintln(os.Stderr, "httpfloor:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "httpfloor:", err)
		os.Exit(1)
	}
}

// serveGo is the child process of one Go server.
func serveGo(role, addr, lib string, c config) error {
	compute, err := computeFunc(lib, int(c.compute.Microseconds()), max(c.footprint, 0), c.computeAs == "work")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	switch role {
	case "go-tcp":
		return serveGoTCP(ln, compute, c.responseBytes)
	case "net/http":
		return serveNetHTTP(ln, compute, c.responseBytes)
	}
	return fmt.Errorf("unknown server %q", role)
}

// build compiles the shared object, the C server and the client into dir.
func build(c config, dir string) error {
	for name, src := range map[string][]byte{"compute.c": computeC, "server.c": serverC, "client.c": clientC} {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "-pthread", "-o", "libfloor.so", "compute.c"},
		{"-O2", "-pthread", "-o", "server", "server.c", "compute.c"},
		{"-O2", "-o", "client", "client.c"},
	} {
		cmd := exec.Command(c.cc, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", c.cc, strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func run(c config) error {
	if (c.kiln == "") != (c.model == "") || (c.kilnBefore != "" && c.kiln == "") {
		return fmt.Errorf("--kiln and --model go together; --kiln-before needs them")
	}
	dir, err := os.MkdirTemp("", "httpfloor")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := build(c, dir); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var k, kb *kilnServer // kb: --kiln-before's server
	if c.kiln != "" {
		if k, err = startKiln(c, dir); err != nil {
			return err
		}
		defer k.stop()
		c.requestBytes = k.requestLen
		// the response's size, from one request through the C client (after 50 untimed:
		// the server specializes the shape it sees), then kiln bench once untimed, so
		// that the rounds time the same journal entry, a hit
		if _, _, body, _, err := measure(c, dir, self, "kiln", k, 1); err != nil {
			return err
		} else {
			c.responseBytes = body
		}
		if _, err := k.inProcess(false); err != nil {
			return err
		}
		if c.kilnBefore != "" {
			bc, bdir := c, filepath.Join(dir, "before")
			bc.kiln = c.kilnBefore
			if err := os.MkdirAll(bdir, 0o755); err != nil {
				return err
			}
			if kb, err = startKiln(bc, bdir); err != nil {
				return err
			}
			defer kb.stop()
			if _, _, _, _, err := measure(c, dir, self, "kiln", kb, 1); err != nil {
				return err
			}
		}
		if c.footprint < 0 {
			st, err := os.Stat(filepath.Join(c.model, "model.onnx"))
			if err != nil {
				return err
			}
			c.footprint = int(st.Size())
		}
		fmt.Printf("kiln serve on %s, %d threads: %d-byte REST requests, %d-byte responses; floor servers at each round's in-process p50, reading %d bytes a request\n",
			c.model, c.threads, c.requestBytes, c.responseBytes, c.footprint)
	} else {
		c.footprint = max(c.footprint, 0)
		fmt.Printf("compute %v per request on two threads, reading %d bytes, %d-byte requests, %d-byte responses, %d requests per server per round\n",
			c.compute, c.footprint, c.requestBytes, c.responseBytes, c.requests)
	}
	over := map[string][]float64{} // per server, per round: p50 minus that round's compute
	own := map[string][]float64{}  // kiln's REST, per round: p50 of each round trip less its Server-Timing
	p50s := map[string][]float64{}
	for r := range c.rounds {
		var row []string
		us := float64(c.compute.Microseconds())
		if k != nil {
			if us, err = k.inProcess(true); err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
			c.compute = time.Duration(us) * time.Microsecond
			row = append(row, fmt.Sprintf("in-process p50 %.3f ms", us/1e3))
			// the two kiln servers' REST endpoints, in alternating order from round to
			// round (--kiln-before): neither always runs first
			rest := []namedServer{{"kiln REST", k}}
			if kb != nil {
				rest = append(rest, namedServer{restBefore, kb})
				if r%2 == 1 {
					rest[0], rest[1] = rest[1], rest[0]
				}
			}
			for _, e := range rest {
				p50, p90, _, o, err := measure(c, dir, self, "kiln", e.srv, c.requests)
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", r+1, e.name, err)
				}
				over[e.name] = append(over[e.name], p50-us)
				if o >= 0 {
					own[e.name] = append(own[e.name], o)
				}
				p50s[e.name] = append(p50s[e.name], p50)
				row = append(row, fmt.Sprintf("%s p50 %.3f p90 %.3f ms (less Server-Timing %.3f)", e.name, p50/1e3, p90/1e3, o/1e3))
			}
			g50, g90, err := k.grpcP50(c.requests)
			if err != nil {
				return fmt.Errorf("round %d, kiln gRPC: %w", r+1, err)
			}
			over["kiln gRPC"] = append(over["kiln gRPC"], g50-us)
			p50s["kiln gRPC"] = append(p50s["kiln gRPC"], g50)
			row = append(row, fmt.Sprintf("kiln gRPC p50 %.3f p90 %.3f ms", g50/1e3, g90/1e3))
		}
		for _, s := range floorServers(c) {
			p50, p90, _, _, err := measure(c, dir, self, s, nil, c.requests)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, s, err)
			}
			p50s[s] = append(p50s[s], p50)
			over[s] = append(over[s], p50-us)
			row = append(row, fmt.Sprintf("%s p50 %.3f p90 %.3f ms", s, p50/1e3, p90/1e3))
		}
		fmt.Printf("round %d: %s\n", r+1, strings.Join(row, ", "))
	}
	names := floorServers(c)
	if k != nil {
		names = append([]string{"kiln REST", "kiln gRPC"}, names...)
	}
	if kb != nil {
		names = append([]string{restBefore}, names...)
	}
	for _, s := range names {
		m, o := median(p50s[s]), median(over[s])
		base := m - o
		pct := ""
		if base > 0 {
			pct = fmt.Sprintf(" (%+.1f%%)", 100*o/base)
		}
		what := "the compute"
		if k != nil {
			what = "in process"
		}
		fmt.Printf("%-9s median p50 %.3f ms: %+.3f ms over %s%s\n", s, m/1e3, o/1e3, what, pct)
		if len(own[s]) == c.rounds {
			fmt.Printf("%-9s per request, over its own inference (Server-Timing): median p50 %+.3f ms\n", s, median(own[s])/1e3)
		}
	}
	if k != nil {
		d := median(over["kiln REST"]) - median(over["net/http"])
		fmt.Printf("kiln REST overhead minus net/http's: %+.3f ms\n", d/1e3)
		if c.computeAs == "work" {
			fmt.Printf("kiln REST overhead minus %s's: %+.3f ms\n", clockFloor, (median(over["kiln REST"])-median(over[clockFloor]))/1e3)
		}
		if len(own["kiln REST"]) == c.rounds {
			fmt.Printf("kiln REST overhead per request (round trip less Server-Timing) minus net/http's: %+.3f ms\n", (median(own["kiln REST"])-median(over["net/http"]))/1e3)
		}
	}
	if kb != nil {
		d := median(over[restBefore]) - median(over["net/http"])
		fmt.Printf("%s overhead minus net/http's: %+.3f ms\n", restBefore, d/1e3)
		if len(own[restBefore]) == c.rounds {
			fmt.Printf("%s overhead per request (round trip less Server-Timing) minus net/http's: %+.3f ms\n", restBefore, (median(own[restBefore])-median(over["net/http"]))/1e3)
		}
	}
	return nil
}

// namedServer is a kiln server's REST endpoint as the rounds and the summary name it.
type namedServer struct {
	name string
	srv  *kilnServer
}

// restBefore names --kiln-before's REST endpoint in the rounds and the summary.
const restBefore = "kiln REST (before)"

// measure starts one server (none for "kiln": it is running), runs the C client against
// it for n timed requests and stops the server. It returns the p50 and p90 in
// microseconds, the response's body size, and the p50 of each round trip less the
// server's Server-Timing inference time (-1: the server sends none).
func measure(c config, dir, self, server string, k *kilnServer, n int) (p50, p90 float64, body int, own float64, err error) {
	reqFile := filepath.Join(dir, "floor-request")
	port := 0
	if server == "kiln" {
		port, reqFile = k.httpPort, k.restFile
	} else {
		if port, err = freePort(); err != nil {
			return 0, 0, 0, 0, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		var srv *exec.Cmd
		role, as := server, c.computeAs
		if server == clockFloor {
			role, as = "net/http", "time"
		}
		if role == "c" {
			fixed := "0"
			if as == "work" {
				fixed = "1"
			}
			srv = exec.Command(filepath.Join(dir, "server"), strconv.Itoa(port), strconv.FormatInt(c.compute.Microseconds(), 10), strconv.Itoa(c.responseBytes), strconv.Itoa(max(c.footprint, 0)), fixed)
		} else {
			srv = exec.Command(self, "--serve", role, "--listen", addr, "--lib", filepath.Join(dir, "libfloor.so"),
				"--compute", c.compute.String(), "--compute-as", as, "--response-bytes", strconv.Itoa(c.responseBytes), "--footprint", strconv.Itoa(max(c.footprint, 0)))
		}
		srv.Stderr = os.Stderr
		if err := srv.Start(); err != nil {
			return 0, 0, 0, 0, err
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		if err := waitListening(addr); err != nil {
			return 0, 0, 0, 0, err
		}
		head := fmt.Sprintf("POST /v2/models/floor/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", c.requestBytes)
		if err := os.WriteFile(reqFile, append([]byte(head), make([]byte, c.requestBytes)...), 0o644); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	var out bytes.Buffer
	cl := exec.Command(filepath.Join(dir, "client"), strconv.Itoa(port), strconv.Itoa(n), reqFile)
	cl.Stdout, cl.Stderr = &out, os.Stderr
	if err := cl.Run(); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("client: %w", err)
	}
	if _, err := fmt.Sscan(out.String(), &p50, &p90, &body, &own); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("client printed %q: %w", out.String(), err)
	}
	return p50, p90, body, own, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no server on %s after 10s", addr)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
