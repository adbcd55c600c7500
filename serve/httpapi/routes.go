package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/internal/membudget"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/modelrepo"
)

// Options configure the REST API.
type Options struct {
	// MaxRequestBytes bounds a request body after decompression (0: 64 MiB).
	MaxRequestBytes int64
	// Version is reported by GET /v2.
	Version string
	// Log receives one line per request (info; health probes at debug) besides errors.
	Log *zap.Logger
	// BearerToken, when set, is required as "Authorization: Bearer <token>" on every
	// path but /v2/health/live and /v2/health/ready (401 otherwise).
	BearerToken string
	// RequestTimeout bounds each request's time in the server (0: no bound); past it
	// an inference fails with 504.
	RequestTimeout time.Duration
	// ReadTimeout bounds reading a request's body, from the moment its handling
	// starts: a body not complete by then gets 408 and the connection is closed
	// (0: no bound). Applied only on an http.Server's connections (limits.go).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response: from the request's start on every
	// endpoint but inference, and from the end of the inference on that one, so that
	// it never cuts a long inference (0: no bound).
	WriteTimeout time.Duration
	// Budget bounds the request bodies held in memory at once (shared with the gRPC
	// face): an inference reserves its body's size, or MaxRequestBytes while a body
	// of unknown size is read, and holds it until its response is written; it waits
	// for the budget until the body's read deadline (503 past it). nil: no bound.
	Budget *membudget.Budget
}

// Server is the REST (HTTP/JSON) face of a serve.Service.
type Server struct {
	svc    *serve.Service
	opts   Options
	log    *zap.Logger
	bodies bodyPool // inference bodies' buffers (bodypool.go)
}

// route is one row of the route table.
type route struct {
	method, path string
	handle       func(*Server, *gin.Context)
}

// routes is the whole REST API: the Open Inference Protocol v2 and the Triton
// extensions kiln implements. A model path with and without /versions/:version maps to
// the same handler.
var routes = []route{
	{http.MethodGet, "/v2/health/live", (*Server).live},
	{http.MethodGet, "/v2/health/ready", (*Server).ready},
	{http.MethodGet, "/v2", (*Server).serverMetadata},
	{http.MethodGet, "/v2/models/stats", (*Server).stats},
	{http.MethodGet, "/v2/models/:model", (*Server).modelMetadata},
	{http.MethodGet, "/v2/models/:model/ready", (*Server).modelReady},
	{http.MethodPost, "/v2/models/:model/infer", (*Server).infer},
	{http.MethodGet, "/v2/models/:model/stats", (*Server).stats},
	{http.MethodGet, "/v2/models/:model/config", (*Server).config},
	{http.MethodGet, "/v2/models/:model/versions/:version/config", (*Server).config},
	{http.MethodGet, "/v2/models/:model/versions/:version", (*Server).modelMetadata},
	{http.MethodGet, "/v2/models/:model/versions/:version/ready", (*Server).modelReady},
	{http.MethodPost, "/v2/models/:model/versions/:version/infer", (*Server).infer},
	{http.MethodGet, "/v2/models/:model/versions/:version/stats", (*Server).stats},
	{http.MethodPost, "/v2/repository/index", (*Server).repositoryIndex},
	{http.MethodPost, "/v2/repository/models/:model/load", (*Server).repositoryLoad},
	{http.MethodPost, "/v2/repository/models/:model/unload", (*Server).repositoryUnload},
	{http.MethodGet, "/v2/systemsharedmemory/status", (*Server).shmStatus},
	{http.MethodGet, "/v2/systemsharedmemory/region/:region/status", (*Server).shmStatus},
	{http.MethodPost, "/v2/systemsharedmemory/register", (*Server).shmRegister},
	{http.MethodPost, "/v2/systemsharedmemory/region/:region/register", (*Server).shmRegister},
	{http.MethodPost, "/v2/systemsharedmemory/unregister", (*Server).shmUnregister},
	{http.MethodPost, "/v2/systemsharedmemory/region/:region/unregister", (*Server).shmUnregister},
	{http.MethodGet, "/v2/cudasharedmemory/status", (*Server).noCUDASharedMemory},
	{http.MethodGet, "/v2/cudasharedmemory/region/:region/status", (*Server).noCUDASharedMemory},
	{http.MethodPost, "/v2/cudasharedmemory/register", (*Server).noCUDASharedMemory},
	{http.MethodPost, "/v2/cudasharedmemory/region/:region/register", (*Server).noCUDASharedMemory},
	{http.MethodPost, "/v2/cudasharedmemory/unregister", (*Server).noCUDASharedMemory},
	{http.MethodPost, "/v2/cudasharedmemory/region/:region/unregister", (*Server).noCUDASharedMemory},
}

// extensions lists the protocol extensions this server implements (GET /v2 advertises
// exactly these).
var extensions = []string{"binary_tensor_data", "classification", "statistics", "model_configuration", "model_repository", "system_shared_memory"}

// New builds the HTTP handler.
func New(svc *serve.Service, opts Options) http.Handler {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 64 << 20
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{svc: svc, opts: opts, log: opts.Log}
	r := gin.New()
	// deadlines before anything else can refuse a request, so that the body of a
	// refused request is discarded under its read deadline too
	r.Use(s.accessLog, gin.Recovery(), s.ioDeadlines, reserveOnly)
	if opts.BearerToken != "" {
		r.Use(bearerAuth(opts.BearerToken))
	}
	r.Use(s.declaredTooLarge)
	if opts.RequestTimeout > 0 {
		r.Use(deadline(opts.RequestTimeout))
	}
	r.HandleMethodNotAllowed = true
	// route on the escaped path: a model name with an escaped "/" ("..%2Fevil") is one
	// path parameter, refused by the service like every other bad name, instead of a
	// path the router reads as more segments
	r.UseRawPath, r.UnescapePathValues = true, true
	for _, rt := range routes {
		h := rt.handle
		r.Handle(rt.method, rt.path, func(c *gin.Context) { h(s, c) })
	}
	r.NoRoute(func(c *gin.Context) {
		c.JSON(http.StatusNotFound, gin.H{"error": "no such endpoint: " + c.Request.Method + " " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		c.JSON(http.StatusMethodNotAllowed, gin.H{"error": "method " + c.Request.Method + " not allowed on " + c.Request.URL.Path})
	})
	return r
}

func (s *Server) live(c *gin.Context) {
	if s.svc.Live() {
		c.Status(http.StatusOK)
		return
	}
	c.Status(http.StatusServiceUnavailable)
}

func (s *Server) ready(c *gin.Context) {
	if s.svc.Ready() {
		c.Status(http.StatusOK)
		return
	}
	c.Status(http.StatusServiceUnavailable)
}

func (s *Server) serverMetadata(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"name": "kiln", "version": s.opts.Version, "extensions": extensions})
}

func (s *Server) modelMetadata(c *gin.Context) {
	md, err := s.svc.ModelMetadata(c.Param("model"), c.Param("version"))
	if err != nil {
		fail(c, err)
		return
	}
	io := func(ts []serve.IOMeta) []gin.H {
		out := []gin.H{}
		for _, t := range ts {
			shape := t.Shape
			if shape == nil {
				shape = []int64{}
			}
			out = append(out, gin.H{"name": t.Name, "datatype": t.Datatype, "shape": shape})
		}
		return out
	}
	c.JSON(http.StatusOK, gin.H{"name": md.Name, "versions": md.Versions, "platform": md.Platform, "inputs": io(md.Inputs), "outputs": io(md.Outputs)})
}

func (s *Server) modelReady(c *gin.Context) {
	ok, err := s.svc.ModelReady(c.Param("model"), c.Param("version"))
	if err != nil {
		fail(c, err)
		return
	}
	if ok {
		c.Status(http.StatusOK)
		return
	}
	c.Status(http.StatusServiceUnavailable)
}

// config answers Triton's model configuration extension: the completed configuration
// as JSON with Triton's field names.
func (s *Server) config(c *gin.Context) {
	cfg, err := s.svc.ModelConfig(c.Param("model"), c.Param("version"))
	if err != nil {
		fail(c, err)
		return
	}
	b, err := modelrepo.ModelConfigJSON(cfg)
	if err != nil {
		fail(c, fmt.Errorf("%w: %v", serve.ErrInternal, err))
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

// stats answers Triton's statistics extension.
func (s *Server) stats(c *gin.Context) {
	st, err := s.svc.Stats(c.Param("model"), c.Param("version"))
	if err != nil {
		fail(c, err)
		return
	}
	cnt := func(x serve.Counter) gin.H { return gin.H{"count": x.Count, "ns": x.Ns} }
	var out []gin.H
	for _, m := range st {
		batches := []gin.H{}
		for _, size := range slices.Sorted(maps.Keys(m.Batches)) {
			b := m.Batches[size]
			batches = append(batches, gin.H{"batch_size": size, "compute_input": cnt(b.ComputeInput), "compute_infer": cnt(b.ComputeInfer), "compute_output": cnt(b.ComputeOutput)})
		}
		out = append(out, gin.H{"name": m.Name, "version": m.Version, "last_inference": m.LastInference,
			"inference_count": m.InferenceCount, "execution_count": m.ExecutionCount,
			"inference_stats": gin.H{"success": cnt(m.Success), "fail": cnt(m.Fail), "queue": cnt(m.Queue),
				"compute_input": cnt(m.ComputeInput), "compute_infer": cnt(m.Compute), "compute_output": cnt(m.ComputeOut)},
			"batch_stats": batches})
	}
	if out == nil {
		out = []gin.H{}
	}
	c.JSON(http.StatusOK, gin.H{"model_stats": out})
}

// repositoryLoad and repositoryUnload are Triton's explicit model control (403 unless
// the server runs with repository control). A load's optional body is
// {"parameters": {"config": "<ModelConfig as JSON>"}}, the configuration used instead
// of config.pbtxt; any other parameter is refused (400).
func (s *Server) repositoryLoad(c *gin.Context) {
	configJSON, err := s.loadParams(c.Request)
	if err != nil {
		fail(c, err)
		return
	}
	if configJSON != nil {
		err = s.svc.LoadModelWithConfig(c.Param("model"), configJSON)
	} else {
		err = s.svc.LoadModel(c.Param("model"))
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

// loadParams reads a load request's body: the config parameter's JSON, nil when the
// body or the parameter is absent.
func (s *Server) loadParams(r *http.Request) ([]byte, error) {
	body, held, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	defer held.Release()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var req struct {
		Parameters map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: load request: %v", errBadBody, err)
	}
	var configJSON []byte
	for _, k := range slices.Sorted(maps.Keys(req.Parameters)) {
		if k != "config" {
			return nil, fmt.Errorf("%w: load request: parameter %q is not implemented (kiln takes \"config\")", errBadBody, k)
		}
		v, ok := req.Parameters[k].(string)
		if !ok {
			return nil, fmt.Errorf("%w: load request: parameter \"config\" must be a string holding the model configuration as JSON", errBadBody)
		}
		configJSON = []byte(v)
	}
	return configJSON, nil
}

func (s *Server) repositoryUnload(c *gin.Context) {
	if err := s.svc.UnloadModel(c.Param("model")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

// repositoryIndex lists every model version with its state (Triton's repository
// extension).
func (s *Server) repositoryIndex(c *gin.Context) {
	out := []gin.H{}
	for _, st := range s.svc.Index() {
		e := gin.H{"name": st.Name, "version": st.Version, "state": st.State}
		if st.Reason != "" {
			e["reason"] = st.Reason
		}
		out = append(out, e)
	}
	c.JSON(http.StatusOK, out)
}
