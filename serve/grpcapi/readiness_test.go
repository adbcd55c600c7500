package grpcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/httpapi"
	"github.com/kilnrt/kiln/serve/servetest"
)

// readinessFaces are the three ways a prober asks whether the server is ready.
type readinessFaces struct {
	rest   string
	client pb.GRPCInferenceServiceClient
	health healthpb.HealthClient
}

// ready reports REST /v2/health/ready (200), gRPC ServerReady and grpc.health.v1,
// failing the test when they disagree.
func (f readinessFaces) ready(t *testing.T) bool {
	t.Helper()
	resp, err := http.Get(f.rest + "/v2/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r, err := f.client.ServerReady(ctx(t), &pb.ServerReadyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.health.Check(ctx(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rest, serving := resp.StatusCode == http.StatusOK, h.Status == healthpb.HealthCheckResponse_SERVING
	if rest != r.Ready || serving != r.Ready {
		t.Fatalf("the faces disagree: REST %d, ServerReady %v, health %v", resp.StatusCode, r.Ready, h.Status)
	}
	if !rest && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("REST readiness %d, want 200 or 503", resp.StatusCode)
	}
	return r.Ready
}

// TestReadinessFollowsFailedModelsNotCompiles: three models, "slow" whose compile
// takes until the test lets it go (the stand-in for a 10 s compile), "fails" whose
// compile fails, and "fast". In lazy mode, REST /v2/health/ready, gRPC ServerReady and
// grpc.health.v1 all say ready while slow compiles for its first request, not ready
// once fails has failed and for as long as it is configured, ready again when it is
// unloaded; the request that waited for slow's compile says so in
// kiln-compile-wait-ms (REST header, gRPC header metadata).
func TestReadinessFollowsFailedModelsNotCompiles(t *testing.T) {
	src, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	for _, n := range []string{"fast", "slow", "fails"} {
		os.MkdirAll(filepath.Join(repo, n, "1"), 0o755)
		os.WriteFile(filepath.Join(repo, n, "1", "model.onnx"), src, 0o644)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := &servetest.Engine{Hook: func(c context.Context, m *engine.Model) error {
		switch {
		case strings.HasPrefix(m.Name, "fails/"):
			return errors.New("cc: internal compiler error")
		case strings.HasPrefix(m.Name, "slow/"):
			once.Do(func() { close(started) })
			select {
			case <-release:
			case <-c.Done():
				return c.Err()
			}
		}
		return nil
	}}
	svc, err := serve.New(serve.Options{Repository: repo, Engine: e, LoadMode: serve.LoadLazy, RepositoryControl: true, Load: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	g := New(svc, Options{Version: "test"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	rest := httptest.NewServer(httpapi.New(svc, httpapi.Options{Version: "test"}))
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }); conn.Close(); g.Stop(); rest.Close(); svc.Close() })
	f := readinessFaces{rest: rest.URL, client: pb.NewGRPCInferenceServiceClient(conn), health: healthpb.NewHealthClient(conn)}
	if !f.ready(t) {
		t.Fatal("not ready before any compile")
	}

	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": []int{3, 8}, "data": x}}})
	type answer struct {
		code int
		wait string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Post(rest.URL+"/v2/models/slow/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			answered <- answer{}
			return
		}
		resp.Body.Close()
		answered <- answer{resp.StatusCode, resp.Header.Get(serve.CompileWaitHeader)}
	}()
	<-started
	const compiling = 50 * time.Millisecond // slow's compile lasts at least this long
	for end := time.Now().Add(compiling); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !f.ready(t) {
			t.Fatal("not ready while a model compiles for its first request")
		}
	}
	if r, err := f.client.ModelReady(ctx(t), &pb.ModelReadyRequest{Name: "slow"}); err != nil || r.Ready {
		t.Fatalf("slow while compiling: ModelReady %v %v", r, err)
	}

	if resp, err := http.Post(rest.URL+"/v2/models/fails/infer", "application/json", bytes.NewReader(body)); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("fails: %v %v", resp, err)
	}
	for range 3 {
		if f.ready(t) {
			t.Fatal("ready while a model that failed to load is configured")
		}
	}
	if _, err := f.client.RepositoryModelUnload(ctx(t), &pb.RepositoryModelUnloadRequest{ModelName: "fails"}); err != nil {
		t.Fatal(err)
	}
	if !f.ready(t) {
		t.Fatal("not ready once the failed model is unloaded")
	}

	releaseOnce.Do(func() { close(release) })
	a := <-answered
	if ms, err := strconv.Atoi(a.wait); a.code != http.StatusOK || err != nil || time.Duration(ms)*time.Millisecond < compiling {
		t.Fatalf("the request that waited for the compile: %d, %s %q; want 200 and a wait of at least %v", a.code, serve.CompileWaitHeader, a.wait, compiling)
	}
	resp, err := http.Post(rest.URL+"/v2/models/slow/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(serve.CompileWaitHeader) != "" {
		t.Fatalf("a request after the compile: %d, %s %q; want no header", resp.StatusCode, serve.CompileWaitHeader, resp.Header.Get(serve.CompileWaitHeader))
	}

	// gRPC: fast compiles for its first ModelInfer, whose header metadata says so
	req := &pb.ModelInferRequest{ModelName: "fast", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8},
		Contents: &pb.InferTensorContents{Fp32Contents: x}}}}
	for i, want := range []bool{true, false} {
		var md metadata.MD
		if _, err := f.client.ModelInfer(ctx(t), req, grpc.Header(&md)); err != nil {
			t.Fatal(err)
		}
		if got := len(md.Get(serve.CompileWaitHeader)) == 1; got != want {
			t.Fatalf("ModelInfer %d: %s %q, want it: %v", i, serve.CompileWaitHeader, md.Get(serve.CompileWaitHeader), want)
		}
	}
}
