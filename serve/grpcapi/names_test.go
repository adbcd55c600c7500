package grpcapi

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/serve"
	pb "github.com/kilnrt/kiln/serve/grpcapi/inferencepb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// TestHostileModelNamesGetOneRefusal: every hostile name through every RPC that takes a
// model name gets NOT_FOUND with the same message (RepositoryModelLoad with
// "../../evil" used to load a model from outside the repository); the decoy beside the
// repository is never loaded. Names that are not UTF-8 cannot be sent in a protobuf
// string and are left to the REST test.
func TestHostileModelNamesGetOneRefusal(t *testing.T) {
	src, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := testdata.HostileRepository(t, src)
	svc, err := serve.New(serve.Options{Repository: repo, Engine: &servetest.Engine{}, RepositoryControl: true, Load: []string{"mlp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	g := New(svc, Options{Version: "test"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	defer g.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	bg := context.Background()
	var want string
	sent := 0
	for _, name := range testdata.HostileModelNames {
		if !utf8.ValidString(name) {
			continue
		}
		sent++
		calls := map[string]func() error{
			"load": func() error {
				_, err := c.RepositoryModelLoad(bg, &pb.RepositoryModelLoadRequest{ModelName: name})
				return err
			},
			"unload": func() error {
				_, err := c.RepositoryModelUnload(bg, &pb.RepositoryModelUnloadRequest{ModelName: name})
				return err
			},
			"metadata": func() error {
				_, err := c.ModelMetadata(bg, &pb.ModelMetadataRequest{Name: name})
				return err
			},
			"ready":  func() error { _, err := c.ModelReady(bg, &pb.ModelReadyRequest{Name: name}); return err },
			"config": func() error { _, err := c.ModelConfig(bg, &pb.ModelConfigRequest{Name: name}); return err },
			"stats":  func() error { _, err := c.ModelStatistics(bg, &pb.ModelStatisticsRequest{Name: name}); return err },
			"infer": func() error {
				_, err := c.ModelInfer(bg, &pb.ModelInferRequest{ModelName: name, ModelVersion: "1"})
				return err
			},
		}
		for call, f := range calls {
			st := status.Convert(f())
			if want == "" {
				want = st.Message()
			}
			if st.Code() != codes.NotFound || st.Message() != want || !strings.Contains(want, "unknown model") {
				t.Errorf("%s(%q): %v %q, want NOT_FOUND %q", call, name, st.Code(), st.Message(), want)
			}
		}
	}
	if sent < 35 {
		t.Fatalf("only %d names sent", sent)
	}
	idx, err := c.RepositoryIndex(bg, &pb.RepositoryIndexRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.GetModels() {
		if strings.Contains(m.GetName(), "evil") || strings.Contains(m.GetName(), "link") {
			t.Fatalf("the index lists %q", m.GetName())
		}
	}
}
