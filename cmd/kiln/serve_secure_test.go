package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
)

// TestServeTLSAndAuth runs kiln serve --config with TLS and a bearer token over real
// sockets: HTTPS and gRPC over TLS to clients that trust the self-signed certificate,
// 401/UNAUTHENTICATED without the token, health open, the metrics port plain HTTP,
// flags overriding the file (--log-level, --model-control-mode explicit with
// --load-model "*": unload and load through the authenticated repository API), JSON
// request lines with the request id, and a clean exit on SIGTERM.
func TestServeTLSAndAuth(t *testing.T) {
	bin := buildKiln(t)
	dir := t.TempDir()
	repo := filepath.Join(dir, "models")
	os.MkdirAll(filepath.Join(repo, "mlp", "1"), 0o755)
	src, _ := filepath.Abs("../../examples/models/mlp/1/model.onnx")
	if err := os.Symlink(src, filepath.Join(repo, "mlp", "1", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, pool := selfSigned(t, dir, "kiln-test")
	const token = "tok-3f9a1c"
	tokenPath := filepath.Join(dir, "token")
	os.WriteFile(tokenPath, []byte(token+"\n"), 0o600)
	cfgPath := filepath.Join(dir, "kiln.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`model_repository: %s
http: {address: "127.0.0.1:0"}
grpc: {address: "127.0.0.1:0", max_message_bytes: 8MiB}
metrics: {address: "127.0.0.1:0"}
cache: {dir: %s}
limits: {request_timeout: 1m}
tls: {cert_file: %s, key_file: %s}
auth: {bearer_token_file: %s}
log: {format: json, level: warn}
threads: 2
shutdown_grace: 10s
`, repo, filepath.Join(dir, "journal"), certPath, keyPath, tokenPath)), 0o644)

	cmd := exec.Command(bin, "serve", "--config", cfgPath, "--log-level", "info", "--model-control-mode", "explicit", "--load-model", "*")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var mu sync.Mutex
	var logLines []map[string]any
	var nonJSON []string
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			mu.Lock()
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				logLines = append(logLines, m)
			} else {
				nonJSON = append(nonJSON, sc.Text())
			}
			mu.Unlock()
		}
	}()
	findLog := func(match func(map[string]any) bool) map[string]any {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			for _, m := range logLines {
				if match(m) {
					mu.Unlock()
					return m
				}
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	// the banner is the log's serving line, in JSON like every other
	re := regexp.MustCompile(`^kiln is serving .* on (https://127\.0\.0\.1:[0-9]+) and gRPC on (127\.0\.0\.1:[0-9]+)$`)
	var base, grpcAddr string
	if banner := findLog(func(m map[string]any) bool { msg, _ := m["msg"].(string); return re.MatchString(msg) }); banner != nil {
		sm := re.FindStringSubmatch(banner["msg"].(string))
		base, grpcAddr = sm[1], sm[2]
	}
	if base == "" {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("kiln serve did not start over HTTPS; log: %v %v", logLines, nonJSON)
	}
	go io.Copy(io.Discard, stdout)

	// REST over HTTPS
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: time.Minute}
	do := func(method, path, auth, id string, body []byte) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if id != "" {
			req.Header.Set("X-Request-ID", id)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		if code, _, b := do("GET", p, "", "", nil); code != 200 {
			t.Errorf("%s without a token: %d %s", p, code, b)
		}
	}
	if code, h, b := do("GET", "/v2", "", "", nil); code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(b, `"error"`) {
		t.Errorf("GET /v2 without a token: %d %v %s", code, h, b)
	}
	if code, _, b := do("GET", "/v2", "Bearer wrong", "", nil); code != 401 {
		t.Errorf("GET /v2 with a wrong token: %d %s", code, b)
	}
	if code, _, b := do("GET", "/v2", "Bearer "+token, "", nil); code != 200 || !strings.Contains(b, `"name":"kiln"`) {
		t.Errorf("GET /v2 with the token: %d %s", code, b)
	}
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,8],"data":[0,1,2,3,4,5,6,7]}]}`)
	code, h, b := do("POST", "/v2/models/mlp/infer", "Bearer "+token, "e2e-req-1", body)
	if code != 200 || h.Get("X-Request-ID") != "e2e-req-1" || !strings.Contains(b, `"name":"probs"`) {
		t.Fatalf("infer over HTTPS: %d %q %s", code, h.Get("X-Request-ID"), b)
	}
	// explicit model control through the same authenticated API
	if code, _, b := do("POST", "/v2/repository/models/mlp/unload", "", "", nil); code != 401 {
		t.Errorf("unload without a token: %d %s", code, b)
	}
	if code, _, b := do("POST", "/v2/repository/models/mlp/unload", "Bearer "+token, "", nil); code != 200 {
		t.Errorf("unload: %d %s", code, b)
	}
	if code, _, b := do("POST", "/v2/models/mlp/infer", "Bearer "+token, "", body); code == 200 {
		t.Errorf("infer after unload: %d %s", code, b)
	}
	if code, _, b := do("POST", "/v2/repository/models/mlp/load", "Bearer "+token, "", nil); code != 200 {
		t.Errorf("load: %d %s", code, b)
	}
	if code, _, b := do("POST", "/v2/models/mlp/infer", "Bearer "+token, "", body); code != 200 {
		t.Errorf("infer after load: %d %s", code, b)
	}
	// a client that does not trust the certificate, and plain HTTP on the TLS port
	untrusting := &http.Client{Timeout: 10 * time.Second}
	if _, err := untrusting.Get(base + "/v2/health/live"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: %v, want a certificate error", err)
	}
	if resp, err := untrusting.Get(strings.Replace(base, "https://", "http://", 1) + "/v2/health/live"); err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP on the HTTPS port answered 200")
		}
		resp.Body.Close()
	}

	// gRPC over TLS
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health without a token: %v %v", r, err)
	}
	gc := pb.NewGRPCInferenceServiceClient(conn)
	if _, err := gc.ServerLive(ctx, &pb.ServerLiveRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC ServerLive without a token: %v", err)
	}
	if _, err := gc.ServerLive(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), &pb.ServerLiveRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC ServerLive with a wrong token: %v", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if r, err := gc.ServerLive(actx, &pb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("gRPC ServerLive with the token: %v %v", r, err)
	}
	raw := make([]byte, 32)
	if r, err := gc.ModelInfer(actx, &pb.ModelInferRequest{ModelName: "mlp", Id: "e2e-grpc-1",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 8}}}, RawInputContents: [][]byte{raw}}); err != nil || len(r.RawOutputContents) != 1 {
		t.Errorf("gRPC ModelInfer over TLS: %v %v", r, err)
	}
	plain, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	short, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := healthpb.NewHealthClient(plain).Check(short, &healthpb.HealthCheckRequest{}); err == nil {
		t.Errorf("a plaintext gRPC client got an answer from the TLS port")
	}

	// the metrics port stays plain HTTP, without auth
	serving := findLog(func(m map[string]any) bool { return re.MatchString(fmt.Sprint(m["msg"])) })
	if serving == nil || serving["tls"] != true || serving["auth"] != true {
		t.Fatalf("no serving line with tls and auth: %v", serving)
	}
	resp, err := http.Get("http://" + serving["metrics"].(string) + "/metrics")
	if err != nil {
		t.Fatalf("metrics over plain HTTP: %v", err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(mb), "nv_inference_request_success") {
		t.Errorf("metrics: %d, %d bytes", resp.StatusCode, len(mb))
	}

	// JSON request lines at info (the flag beat the file's warn), with the request ids
	restLine := findLog(func(m map[string]any) bool { return m["msg"] == "request" && m["request_id"] == "e2e-req-1" })
	if restLine == nil || restLine["level"] != "info" || restLine["status"] != float64(200) || restLine["model"] != "mlp" || restLine["path"] != "/v2/models/mlp/infer" {
		t.Errorf("REST request line: %v", restLine)
	}
	if l := findLog(func(m map[string]any) bool { return m["msg"] == "request" && m["request_id"] == "e2e-grpc-1" }); l == nil || l["code"] != "OK" || l["model"] != "mlp" {
		t.Errorf("gRPC request line: %v", l)
	}
	if l := findLog(func(m map[string]any) bool { return m["msg"] == "request" && m["status"] == float64(401) }); l == nil {
		t.Errorf("no line for a refused request")
	}

	cmd.Process.Signal(syscall.SIGTERM)
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("kiln serve did not exit within 15 s of SIGTERM")
	}
	<-logDone
	mu.Lock()
	defer mu.Unlock()
	for _, l := range nonJSON {
		t.Errorf("a log line that is not JSON: %q", l)
	}
}
