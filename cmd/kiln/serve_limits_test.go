package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	"google.golang.org/grpc/status"

	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// startServeConfig runs kiln serve --config with the given YAML (model_repository
// and cache.dir are added) and returns the process and its REST and gRPC addresses.
func startServeConfig(t *testing.T, bin, yaml string) (cmd *exec.Cmd, httpAddr, grpcAddr string) {
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
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
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

// TestUnauthenticatedLargeMessagesCostNoMemory: with a bearer token, four
// unauthenticated 200 MiB ModelInfer calls at once are refused before their
// messages are read: the kiln serve process's resident set (sampled every 5 ms
// while they run) grows by less than 100 MB.
func TestUnauthenticatedLargeMessagesCostNoMemory(t *testing.T) {
	bin := buildKiln(t)
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	os.WriteFile(tokenPath, []byte("tok-51c2\n"), 0o600)
	cmd, _, grpcAddr := startServeConfig(t, bin, fmt.Sprintf(`http: {address: "127.0.0.1:0"}
grpc: {address: "127.0.0.1:0"}
metrics: {enabled: false}
auth: {bearer_token_file: %s}
log: {level: warn}
threads: 1
`, tokenPath))
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// one small refused call first, so that the connection and the server's
	// per-connection state are in the baseline
	if _, err := client.ServerLive(ctx, &pb.ServerLiveRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ServerLive without a token: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	base := rssBytes(t, cmd.Process.Pid)

	const msg = 200 << 20
	req := &pb.ModelInferRequest{ModelName: "mlp",
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{msg / 32, 8}}},
		RawInputContents: [][]byte{make([]byte, msg)}}
	var peak int64
	done := make(chan struct{})
	sampled := make(chan struct{})
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
	errs := make([]error, 4)
	start := time.Now()
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client.ModelInfer(ctx, req)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	close(done)
	<-sampled
	for i, err := range errs {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("call %d: %v, want UNAUTHENTICATED", i, err)
		}
	}
	grew := peak - base
	t.Logf("4 unauthenticated 200 MiB calls in %v: RSS %d MB before, peak %d MB (+%d MB)", took.Round(time.Millisecond), base>>20, peak>>20, grew>>20)
	if grew >= 100<<20 {
		t.Errorf("RSS grew by %d MB, want < 100 MB", grew>>20)
	}
}
