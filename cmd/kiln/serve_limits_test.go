package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/configs"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// startServeConfig runs kiln serve --config with the given YAML (model_repository
// and cache.dir are added) and returns the process and its REST and gRPC addresses.
// With nofile > 0 it runs under a shell's ulimit -n nofile (soft and hard).
func startServeConfig(t *testing.T, bin, yaml string, nofile ...int) (cmd *exec.Cmd, httpAddr, grpcAddr string) {
	t.Helper()
	dir := t.TempDir()
	repo := filepath.Join(dir, "models")
	os.MkdirAll(filepath.Join(repo, "mlp", "1"), 0o755)
	src, _ := filepath.Abs("../../examples/models/mlp/1/model.onnx")
	if err := os.Symlink(src, filepath.Join(repo, "mlp", "1", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "kiln.yaml")
	yaml = fmt.Sprintf("model_repository: %s\ncache: {dir: %s}\n", repo, filepath.Join(dir, "journal")) + yaml
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin, "serve", "--config", cfg)
	if len(nofile) > 0 {
		cmd = exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" serve --config "$1"`, nofile[0]), bin, cfg)
	}
	out, _ := cmd.StderrPipe() // the log, whose "serving" line names the addresses
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	re := regexp.MustCompile(`on https?://([0-9.]+:[0-9]+) and gRPC on ([0-9.]+:[0-9]+)`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, out)
			return cmd, m[1], m[2]
		}
	}
	t.Fatal("kiln serve did not start")
	return nil, "", ""
}

// rssBytes is the resident set size of process pid (Linux /proc).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc/PID/status to read a resident set size from: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestLargeGRPCMessagesMemory runs kiln serve with a bearer token and a 1200 MiB
// soft memory limit. Four unauthenticated 200 MiB ModelInfer calls at once are
// refused before their messages are read: the process's resident set (sampled every
// 5 ms) grows by less than 100 MB. Four authenticated ones (for an unknown model, so
// each message is received and decoded, then refused) wait for the memory budget in
// turn, keep the peak near the soft limit, and their memory is handed back to the
// operating system once they are done: within 5 s the resident set is back within
// 100 MB of where it started.
func TestLargeGRPCMessagesMemory(t *testing.T) {
	bin := buildKiln(t)
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	os.WriteFile(tokenPath, []byte("tok-51c2\n"), 0o600)
	cmd, _, grpcAddr := startServeConfig(t, bin, fmt.Sprintf(`http: {address: "127.0.0.1:0"}
grpc: {address: "127.0.0.1:0"}
metrics: {enabled: false}
auth: {bearer_token_file: %s}
limits: {memory_limit: 1200MiB}
log: {level: info}  # the serving line, which names the addresses, is at info
threads: 1
`, tokenPath))
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-51c2")
	// one small call of each kind first, so that the connection and the server's
	// per-connection state are in the baseline
	if _, err := client.ServerLive(ctx, &pb.ServerLiveRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ServerLive without a token: %v", err)
	}
	if _, err := client.ServerLive(authed, &pb.ServerLiveRequest{}); err != nil {
		t.Fatalf("ServerLive with the token: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	base := rssBytes(t, cmd.Process.Pid)

	const msg = 200 << 20
	req := &pb.ModelInferRequest{ModelName: "absent",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{msg / 32, 8}}},
		RawInputContents: [][]byte{make([]byte, msg)}}
	// burst sends four calls at once and returns their codes, the peak resident set
	// while they ran and how long they took
	burst := func(ctx context.Context) ([]codes.Code, int64, time.Duration) {
		var peak int64
		done, sampled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				peak = max(peak, rssBytes(t, cmd.Process.Pid))
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		var wg sync.WaitGroup
		got := make([]codes.Code, 4)
		start := time.Now()
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := client.ModelInfer(ctx, req)
				got[i] = status.Code(err)
			}()
		}
		wg.Wait()
		took := time.Since(start)
		time.Sleep(100 * time.Millisecond)
		close(done)
		<-sampled
		return got, peak, took
	}

	got, peak, took := burst(ctx)
	for i, c := range got {
		if c != codes.Unauthenticated {
			t.Errorf("unauthenticated call %d: %v, want UNAUTHENTICATED", i, c)
		}
	}
	t.Logf("4 unauthenticated 200 MiB calls in %v: RSS %d MB before, peak %d MB (+%d MB)", took.Round(time.Millisecond), base>>20, peak>>20, (peak-base)>>20)
	if peak-base >= 100<<20 {
		t.Errorf("RSS grew by %d MB, want < 100 MB", (peak-base)>>20)
	}

	got, peak, took = burst(authed)
	for i, c := range got {
		if c != codes.NotFound {
			t.Errorf("authenticated call %d for an unknown model: %v, want NOT_FOUND", i, c)
		}
	}
	var after int64
	var back time.Duration
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(50 * time.Millisecond) {
		if after, back = rssBytes(t, cmd.Process.Pid), time.Since(start); after-base < 100<<20 {
			break
		}
	}
	t.Logf("4 authenticated 200 MiB calls in %v: peak %d MB; %d MB %v later", took.Round(time.Millisecond), peak>>20, after>>20, back.Round(time.Millisecond))
	if peak > 1600<<20 {
		t.Errorf("peak RSS %d MB with a 1200 MiB soft memory limit and a 1 GiB budget", peak>>20)
	}
	if after-base >= 100<<20 {
		t.Errorf("RSS still %d MB 5 s after the calls (%d MB before them)", after>>20, base>>20)
	}
}

// TestServeAnswersProbesThroughAConnectionFlood runs kiln serve with 256 open files
// (ulimit -n, soft and hard) and short timeouts: 300 idle keep-alive connections
// leave the probes answered (the longest idle connections are closed for new ones),
// and so does every connection up to the cap busy with a slow body (the reserve);
// an idle keep-alive connection is closed after http.idle_timeout; a body trickled
// at 1 byte a second is cut at http.read_timeout with 408; Content-Length 10^12
// with 10 bytes sent gets 413 at once.
func TestServeAnswersProbesThroughAConnectionFlood(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to set the open-file limit with")
	}
	bin := buildKiln(t)
	cmd, httpAddr, _ := startServeConfig(t, bin, `http: {address: "127.0.0.1:0", read_timeout: 2s, idle_timeout: 1s}
grpc: {address: "127.0.0.1:0"}
metrics: {enabled: false}
log: {level: info}  # the serving line, which names the addresses, is at info
threads: 1
`, 256)
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	request := func(c net.Conn, br *bufio.Reader, req string) (int, string, time.Duration) {
		t.Helper()
		start := time.Now()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	closedAfter := func(c net.Conn, br *bufio.Reader) time.Duration {
		t.Helper()
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("data on a connection expected to close")
		}
		return time.Since(start)
	}
	const get = "GET /v2 HTTP/1.1\r\nHost: kiln\r\n\r\n"

	// the flood: 300 keep-alive connections, each idle after one request
	for i := range 300 {
		c, br := dial()
		if code, body, _ := request(c, br, get); code != 200 {
			t.Fatalf("connection %d: %d %s", i, code, body)
		}
	}
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		c, br := dial()
		code, body, took := request(c, br, "GET "+p+" HTTP/1.1\r\nHost: kiln\r\n\r\n")
		t.Logf("%s after 300 idle connections, 256 open files: %d in %v", p, code, took.Round(time.Microsecond))
		if code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", cmd.Process.Pid)); err == nil && !regexp.MustCompile(`Max open files\s+256\s+256`).Match(b) {
		t.Fatalf("the server does not run with 256 open files:\n%s", b)
	}

	// at the cap, every connection busy with a body that has not arrived (it gets
	// the 2 s read timeout): the probes answer on the reserve
	busy := connCapsFor(configs.DefaultFile(), 256).http + 2
	for range busy {
		c, _ := dial()
		io.WriteString(c, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 100\r\n\r\n{")
	}
	time.Sleep(200 * time.Millisecond)
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		c, br := dial()
		code, body, took := request(c, br, "GET "+p+" HTTP/1.1\r\nHost: kiln\r\n\r\n")
		t.Logf("%s with %d connections busy, at the cap: %d in %v", p, busy, code, took.Round(time.Microsecond))
		if code != 200 {
			t.Fatalf("%s at the cap: %d %s", p, code, body)
		}
	}
	time.Sleep(2500 * time.Millisecond) // the busy connections' bodies time out

	// idle keep-alive: closed after http.idle_timeout
	c, br := dial()
	request(c, br, get)
	idle := closedAfter(c, br)
	t.Logf("idle keep-alive connection closed after %v (idle_timeout 1s)", idle.Round(time.Millisecond))
	if idle < 900*time.Millisecond || idle > 3*time.Second {
		t.Errorf("idle connection closed after %v, want about 1s", idle)
	}

	// a body at 1 byte a second: 408 at http.read_timeout
	c, br = dial()
	start := time.Now()
	go func() {
		io.WriteString(c, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 100\r\n\r\n{")
		for range 99 {
			time.Sleep(time.Second)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	trickle := time.Since(start)
	t.Logf("body at 1 B/s: %d after %v (read_timeout 2s)", resp.StatusCode, trickle.Round(time.Millisecond))
	if resp.StatusCode != http.StatusRequestTimeout || trickle < 1900*time.Millisecond || trickle > 4*time.Second {
		t.Errorf("trickled body: %d after %v, want 408 after about 2s", resp.StatusCode, trickle)
	}
	closedAfter(c, br)

	// Content-Length 10^12, 10 bytes sent: 413 at once
	c, br = dial()
	code, body, took := request(c, br, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 1000000000000\r\n\r\n0123456789")
	t.Logf("Content-Length 10^12 with 10 bytes: %d in %v", code, took.Round(time.Microsecond))
	if code != http.StatusRequestEntityTooLarge || took > time.Second {
		t.Errorf("Content-Length 10^12: %d after %v: %s", code, took, body)
	}
}
