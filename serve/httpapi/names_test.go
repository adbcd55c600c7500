package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/serve"
)

// TestHostileModelNamesGetOneRefusal: every hostile name, escaped into the path of every
// endpoint that takes a model name, gets the same 404 and body; the decoy beside the
// repository is never loaded.
func TestHostileModelNamesGetOneRefusal(t *testing.T) {
	src, err := os.ReadFile("../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := testdata.HostileRepository(t, src)
	svc := openService(t, serve.Options{Repository: repo, RepositoryControl: true, Load: []string{"mlp"}})
	srv := httptest.NewServer(New(svc, Options{MaxRequestBytes: 1 << 20}))
	t.Cleanup(srv.Close)

	var want string
	for _, name := range testdata.HostileModelNames {
		m := "/v2/models/" + url.PathEscape(name)
		r := "/v2/repository/models/" + url.PathEscape(name)
		for _, ep := range []struct{ method, path string }{
			{"POST", r + "/load"}, {"POST", r + "/unload"}, {"GET", m}, {"GET", m + "/ready"}, {"GET", m + "/config"},
			{"GET", m + "/stats"}, {"POST", m + "/infer"}, {"GET", m + "/versions/1"}, {"POST", m + "/versions/1/infer"},
		} {
			code, _, b := do(t, ep.method, srv.URL+ep.path, []byte(`{"inputs":[]}`), nil)
			if want == "" {
				want = string(b)
			}
			if code != http.StatusNotFound || string(b) != want || !strings.Contains(want, "unknown model") {
				t.Errorf("%s %q: %d %s, want 404 %s", ep.method, ep.path, code, b, want)
			}
		}
	}
	_, _, idx := do(t, "POST", srv.URL+"/v2/repository/index", nil, nil)
	if strings.Contains(string(idx), "evil") || strings.Contains(string(idx), "link") {
		t.Fatalf("the index lists a model outside the repository: %s", idx)
	}
}
