//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kilnrt/kiln/bench/internal/zooreq"
	"github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// kilnServer is `kiln serve` on one zoo model, measured beside the floor servers: the
// REST request is the binary-extension request loadgen sends, timed by the same C client;
// the gRPC one carries the same tensors in raw_input_contents, timed by a Go client.
type kilnServer struct {
	c          config
	name       string
	httpPort   int
	grpcAddr   string
	journal    string
	restFile   string // the whole REST request, for the C client
	req        *zooreq.Request
	respBytes  int // the REST response's body size
	requestLen int // the REST request's body size
	stop       func()
}

// startKiln writes a one-model repository under dir, starts kiln serve on it (REST and
// gRPC on free ports, the journal in dir) and waits until the model is READY: the server
// compiles it in the background at start.
func startKiln(c config, dir string) (*kilnServer, error) {
	k := &kilnServer{c: c, name: filepath.Base(filepath.Clean(c.model)), journal: filepath.Join(dir, "journal")}
	ver := filepath.Join(dir, "repo", k.name, "1")
	if err := os.MkdirAll(ver, 0o755); err != nil {
		return nil, err
	}
	src, err := filepath.Abs(filepath.Join(c.model, "model.onnx"))
	if err != nil {
		return nil, err
	}
	if err := os.Symlink(src, filepath.Join(ver, "model.onnx")); err != nil {
		return nil, err
	}
	if k.req, err = zooreq.Build(c.model, c.seq); err != nil {
		return nil, err
	}
	k.requestLen = len(k.req.Body)
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	gp, err := freePort()
	if err != nil {
		return nil, err
	}
	k.httpPort, k.grpcAddr = hp, "127.0.0.1:"+strconv.Itoa(gp)
	srv := exec.Command(c.kiln, "serve", "--model-repository", filepath.Join(dir, "repo"),
		"--http-address", "127.0.0.1:"+strconv.Itoa(hp), "--grpc-address", k.grpcAddr, "--metrics-address", "",
		"--cache-dir", k.journal, "--threads", strconv.Itoa(c.threads), "--log-level", "warn")
	srv.Stdout, srv.Stderr = io.Discard, os.Stderr
	if err := srv.Start(); err != nil {
		return nil, err
	}
	k.stop = func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }
	base := "http://127.0.0.1:" + strconv.Itoa(hp)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get(base + "/v2/models/" + k.name + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			k.stop()
			return nil, fmt.Errorf("kiln serve: %s not ready after 5 minutes", k.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	head := fmt.Sprintf("POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n",
		k.name, len(k.req.Body))
	for h, v := range k.req.Header {
		head += h + ": " + v + "\r\n"
	}
	k.restFile = filepath.Join(dir, "kiln-request")
	if err := os.WriteFile(k.restFile, append([]byte(head+"\r\n"), k.req.Body...), 0o644); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// inProcess runs kiln bench on the server's journal entry with the server's threads
// and returns its p50 in microseconds; hit requires that entry to be found, not built.
func (k *kilnServer) inProcess(hit bool) (float64, error) {
	args := []string{"bench", filepath.Join(k.c.model, "model.onnx"), "--threads", strconv.Itoa(k.c.threads),
		"--iters", strconv.Itoa(k.c.requests), "--json", "-q", "--cache-dir", k.journal}
	var dims []string
	for _, in := range k.req.Inputs {
		if in.Datatype == "INT64" && len(in.Shape) == 2 && in.Shape[1] == int64(k.c.seq) {
			// token inputs: bench's stand-ins are zeros, the cost is the same
			dims = []string{"--dims", fmt.Sprintf("batch=1,seq=%d", k.c.seq)}
		}
	}
	if dims != nil {
		args = append(args, dims...)
	} else {
		args = append(args, "--input-dir", filepath.Join(k.c.model, "test_data_set_0"))
	}
	out, err := exec.Command(k.c.kiln, args...).Output()
	if err != nil {
		return 0, fmt.Errorf("kiln bench: %v", err)
	}
	var r struct {
		P50     float64 `json:"p50_ms"`
		Journal string  `json:"journal"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("kiln bench printed %q: %v", out, err)
	}
	if hit && r.Journal != "hit" {
		return 0, fmt.Errorf("kiln bench compiled the model (journal %q): the server's entry was not reused", r.Journal)
	}
	return r.P50 * 1e3, nil
}

// grpcP50 times n ModelInfer calls (after 50 untimed) on one connection and returns the
// p50 and p90 in microseconds.
func (k *kilnServer) grpcP50(n int) (float64, float64, error) {
	conn, err := grpc.NewClient(k.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	cl := inferencepb.NewGRPCInferenceServiceClient(conn)
	req := &inferencepb.ModelInferRequest{ModelName: k.name}
	for _, in := range k.req.Inputs {
		req.Inputs = append(req.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape})
		req.RawInputContents = append(req.RawInputContents, in.Raw)
	}
	ts := make([]float64, 0, n)
	for i := range n + 50 {
		t := time.Now()
		if _, err := cl.ModelInfer(context.Background(), req); err != nil {
			return 0, 0, fmt.Errorf("ModelInfer: %w", err)
		}
		if i >= 50 {
			ts = append(ts, float64(time.Since(t).Nanoseconds())/1e3)
		}
	}
	slices.Sort(ts)
	return ts[len(ts)/2], ts[len(ts)*9/10], nil
}
