package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/internal/membudget"
	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/grpcapi"
	"github.com/kilnrt/kiln/serve/httpapi"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// defaultRepository is the bundled example repository, relative to the repository root.
const defaultRepository = "examples/models"

func serveCmd() *cobra.Command {
	var fl serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--model-repository DIR]",
		Short: "Serve a model repository over the Open Inference Protocol (KServe v2 REST and gRPC)",
		Long: `Serve every <repo>/<model>/<version>/model.onnx over HTTP (Open Inference Protocol v2,
Triton-compatible paths, JSON and binary tensor data) and over gRPC (Triton's
inference.GRPCInferenceService, grpc.health.v1 and server reflection; --grpc-address,
empty to disable). Every model compiles at start in the background
(--load-mode background; eager: readiness waits for it; lazy: on its first request)
through the binary journal, so restarts and replicas sharing --cache-dir start warm; a
request that comes before its model is compiled waits for that compile and says so in
the kiln-compile-wait-ms header. Readiness is strict, as Triton's: false while a model
that should serve failed to load (--strict-readiness=false: ignore them), never for a
compile that readiness does not wait for. Without --model-repository it serves the bundled examples
(examples/models: a small MLP and SqueezeNet 1.1). SIGTERM or Ctrl-C: readiness turns
false, requests in flight finish (up to --grace), then the server exits.
Each model's config.pbtxt (Triton's format; optional) sets batching (max_batch_size,
dynamic_batching), instance groups and the version policy. A KIND_GPU instance group
runs on the CUDA GPUs (gpus: [N] is cuda:N), or without them on the OpenCL devices
(gpus: [N] is opencl:N as kiln devices lists them); --gpus none: everything on the CPU; a group asking for a GPU kiln lacks runs on the CPU, with a
warning. Prometheus metrics
(Triton's nv_inference_* names, kiln_compile_seconds, kiln_journal_*_total,
kiln_model_state, kiln_tune_*) are on --metrics-address at /metrics (plain HTTP, no auth).
With --tune background the server tunes the models that receive traffic while it is
idle (--tune-idle-after with no request in flight or queued), pausing the moment a
request arrives, within --tune-budget measuring time per model and --tune-cpu, and
swaps in executables rebuilt with the tuning records as a reload swaps versions.

--config FILE reads the server config file (YAML, configs/kiln.yaml is a commented
example); the flags given on the command line override its keys (each flag's help
names its key in brackets). With tls.cert_file and tls.key_file (--tls-cert-file,
--tls-key-file) REST is HTTPS and gRPC uses TLS; the files are re-read when they
change. With auth.bearer_token_file (--bearer-token-file) every request but
/v2/health/live, /v2/health/ready, grpc.health.v1 and gRPC reflection needs
"Authorization: Bearer <token>". Each request gets an X-Request-ID (gRPC: the
request's id or x-request-id metadata), echoed back, and one log line (info level).
With --model-control-mode explicit (Triton's explicit model control) only the
--load-model models load at start, and the repository API loads and unloads them.
Slow and hostile clients: a REST body must arrive within http.read_timeout (408), a
response be written within http.write_timeout of the end of its inference, an idle
keep-alive connection closes after http.idle_timeout; connections are capped below
the open-file limit (at the REST cap the longest idle one is closed for a new one, and
the health probes keep a reserve); request data held in memory is bounded by
limits.max_inflight_bytes across REST and gRPC; the gRPC bearer token is checked before
a message is read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := serveConfig(cmd.Flags(), &fl, os.Getenv)
			if err != nil {
				return err
			}
			return runServe(cfg)
		},
	}
	fl.register(cmd.Flags())
	return cmd
}

// runServe serves until SIGTERM or Ctrl-C, then drains.
func runServe(cfg configs.File) error {
	log, err := newServeLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer log.Sync()
	var token string
	if cfg.Auth.BearerTokenFile != "" {
		if token, err = readBearerToken(cfg.Auth.BearerTokenFile); err != nil {
			return usageError{err}
		}
	}
	var tlsConf *tls.Config
	if cfg.TLS.CertFile != "" {
		certs, err := loadCertFiles(cfg.TLS.CertFile, cfg.TLS.KeyFile, log)
		if err != nil {
			return usageError{err}
		}
		tlsConf = certs.tlsConfig()
	} else if token != "" {
		log.Warn("bearer-token auth without TLS: tokens cross the network in clear text (set tls.cert_file and tls.key_file, or terminate TLS in front of kiln)")
	}
	cf := cacheFlagsOf(cfg.Cache)
	j, err := cf.open(log)
	if err != nil {
		return err
	}
	defer j.Close()
	jit := jitCompiler()
	dev, err := openCPU(cfg.Threads, jit != nil)
	if err != nil {
		return err
	}
	defer dev.Close()
	buildInCache(dev, j)
	ecfg := engine.Config{Target: target.Host(), Device: dev, Journal: j, Compiler: jit, Timeout: time.Duration(cfg.Limits.CompileTimeout),
		Limits: vm.Limits{RequestBytes: int64(cfg.Limits.RequestMemory), TensorBytes: int64(cfg.Limits.TensorMemory),
			Hint: "raise limits.request_memory / limits.tensor_memory (--max-request-memory, --max-tensor-memory)"}}
	eng, err := engine.New(ecfg)
	if err != nil {
		return err
	}
	gcfg := ecfg // the GPUs' engines: the CPU's recipe, with the GPU precision
	if gcfg.Recipe.Precision, err = engine.ParsePrecision(cfg.Precision); err != nil {
		return usageError{err}
	}
	gpus, closeGPUs := serveGPUs(cfg.GPUs, gcfg, dev, log)
	defer closeGPUs() // after the service has closed its executables

	if jit == nil {
		log.Info("serve-only build: models run from prebuilt journal entries; a model or shape not in the journal is an error (fill it with `kiln prebuild`)")
	}
	explicit := cfg.ModelControlMode == "explicit"
	tuning, err := serveTuning(cfg.Tune, j, eng.Threads())
	if err != nil {
		return err
	}
	svc, err := serve.New(serve.Options{Repository: cfg.ModelRepository, Engine: eng, GPUs: gpus, Log: log, LoadMode: serve.LoadMode(cfg.LoadMode),
		LenientReadiness:  !cfg.StrictReadiness,
		RepositoryControl: explicit, Load: cfg.LoadModels, Instances: cfg.Instances, SpecializeAfter: cfg.SpecializeAfter,
		Compiles: cfg.Limits.Compiles, Tune: tuning})
	if err != nil {
		return err
	}
	defer svc.Close()
	timeout := time.Duration(cfg.Limits.RequestTimeout)
	nofile := openFileLimit()
	caps := connCapsFor(cfg, nofile)
	if caps.exceed {
		log.Warn("the connection caps leave few open files for kiln's own (http.max_connections, grpc.max_connections)",
			zap.Int("open_file_limit", nofile), zap.Int("http", caps.http), zap.Int("grpc", caps.grpc))
	}
	if m := cfg.Limits.MemoryLimit; m > 0 {
		debug.SetMemoryLimit(int64(m))
	}
	// one budget for request bodies and messages of both protocols
	budget := membudget.New(int64(cfg.Limits.MaxInflightBytes), membudget.Options{ReleaseAfter: membudget.DefaultReleaseAfter})
	errc := make(chan error, 3)
	scheme, httpShown := "http", "off"
	if tlsConf != nil {
		scheme = "https"
	}
	var srv *http.Server
	if cfg.HTTP.Enabled {
		ln, err := net.Listen("tcp", cfg.HTTP.Address)
		if err != nil {
			return fmt.Errorf("http.address: %w", err)
		}
		lim := httpapi.LimitConns(ln, httpapi.ConnLimits{Max: caps.http, ProbeReserve: probeReserve, Log: log})
		srv = &http.Server{
			Handler: httpapi.New(svc, httpapi.Options{MaxRequestBytes: int64(cfg.Limits.MaxRequestBytes), Version: version, Log: log,
				BearerToken: token, RequestTimeout: timeout, ReadTimeout: time.Duration(cfg.HTTP.ReadTimeout),
				WriteTimeout: time.Duration(cfg.HTTP.WriteTimeout), Budget: budget}),
			ReadHeaderTimeout: time.Duration(cfg.HTTP.ReadHeaderTimeout),
			IdleTimeout:       time.Duration(cfg.HTTP.IdleTimeout),
			TLSConfig:         tlsConf,
			ConnContext:       httpapi.ConnContext,
			ConnState:         lim.ConnState,
			ErrorLog:          zap.NewStdLog(log.Named("http")), // TLS handshake errors and the like, in the log's format
		}
		go func() {
			if tlsConf != nil {
				errc <- srv.ServeTLS(lim, "", "")
			} else {
				errc <- srv.Serve(lim)
			}
		}()
		httpShown = ln.Addr().String()
	}
	var gsrv *grpc.Server
	grpcShown, stopping := "off", make(chan struct{})
	if cfg.GRPC.Enabled {
		gln, err := net.Listen("tcp", cfg.GRPC.Address)
		if err != nil {
			if srv != nil {
				srv.Close()
			}
			return fmt.Errorf("grpc.address: %w", err)
		}
		gsrv = grpcapi.New(svc, grpcapi.Options{MaxMessageBytes: int(cfg.GRPC.MaxMessageBytes), Version: version, Log: log, Stopping: stopping,
			TLS: tlsConf, BearerToken: token, RequestTimeout: timeout, Budget: budget,
			MaxConcurrentStreams: uint32(cfg.GRPC.MaxConcurrentStreams), IdleTimeout: time.Duration(cfg.GRPC.IdleTimeout)})
		go func() { errc <- gsrv.Serve(grpcapi.LimitConns(gln, caps.grpc, log)) }()
		grpcShown = gln.Addr().String()
	}
	metricsShown := "off"
	var msrv *http.Server
	if cfg.Metrics.Enabled {
		mln, err := net.Listen("tcp", cfg.Metrics.Address)
		if err != nil {
			if srv != nil {
				srv.Close()
			}
			if gsrv != nil {
				gsrv.Stop()
			}
			return fmt.Errorf("metrics.address: %w", err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(svc.Metrics(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mlim := httpapi.LimitConns(mln, httpapi.ConnLimits{Max: metricsConns, Log: log})
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
			IdleTimeout: time.Duration(cfg.HTTP.IdleTimeout), ConnState: mlim.ConnState}
		go func() { errc <- msrv.Serve(mlim) }()
		metricsShown = mln.Addr().String()
	}
	for _, st := range svc.Index() {
		log.Info("model", zap.String("name", st.Name), zap.String("version", st.Version), zap.String("state", string(st.State)), zap.String("reason", st.Reason))
	}
	// the banner is the log's "serving" line (JSON with log.format json), with the
	// addresses in its message for a reader and in its fields for a collector
	banner := fmt.Sprintf("kiln is serving %s over gRPC on %s (REST is off)", cfg.ModelRepository, grpcShown)
	var try []zap.Field
	if srv != nil {
		banner = fmt.Sprintf("kiln is serving %s on %s://%s", cfg.ModelRepository, scheme, httpShown)
		if gsrv != nil {
			banner += " and gRPC on " + grpcShown
		}
		try = append(try, zap.String("try", exampleCurl(scheme, httpShown, token != "", svc)))
	}
	log.Info(banner, append([]zap.Field{zap.String("http", httpShown), zap.Bool("tls", tlsConf != nil), zap.Bool("auth", token != ""), zap.String("grpc", grpcShown),
		zap.String("metrics", metricsShown), zap.String("repository", cfg.ModelRepository), zap.String("journal", j.Dir()),
		zap.String("load_mode", cfg.LoadMode), zap.Bool("strict_readiness", cfg.StrictReadiness), zap.String("model_control_mode", cfg.ModelControlMode),
		zap.Duration("request_timeout", timeout), zap.Int("open_file_limit", nofile), zap.Int("http_max_connections", caps.http), zap.Int("grpc_max_connections", caps.grpc),
		zap.Stringer("max_inflight_bytes", cfg.Limits.MaxInflightBytes), zap.Int64("memory_limit", debug.SetMemoryLimit(-1))}, try...)...)
	log.Sync() // now, not at the next flush: scripts wait for this line
	grace := time.Duration(cfg.ShutdownGrace)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case err := <-errc:
		return err
	case s := <-sig:
		log.Info("shutting down: draining requests in flight", zap.String("signal", s.String()), zap.Duration("grace", grace))
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	drained := svc.Drain(ctx)
	close(stopping) // ends health Watch calls and idle inference streams
	grpcStopped := make(chan struct{})
	go func() {
		defer close(grpcStopped)
		if gsrv == nil {
			return
		}
		// GracefulStop waits for the calls still open; at the end of the grace
		// period the rest are cut.
		done := make(chan struct{})
		go func() { gsrv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			log.Warn("shutdown: gRPC calls still open after the grace period; closing them")
			gsrv.Stop()
			<-done
		}
	}()
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("shutdown", zap.Error(err))
		}
	}
	<-grpcStopped
	if msrv != nil {
		msrv.Close()
	}
	if drained != nil {
		return fmt.Errorf("requests still running after the %v grace period", grace)
	}
	log.Info("stopped")
	return nil
}

// probeReserve is how many REST connections beyond http.max_connections answer the
// health probes when every other connection is busy; metricsConns caps the metrics
// endpoint's connections (a scraper or two).
const (
	probeReserve = 8
	metricsConns = 16
)

// fdReserve is how many open files the connection caps leave for kiln's own (the
// journal, model files, the C compiler's pipes, listeners, logs).
const fdReserve = 128

// connCaps are the connection caps kiln serve runs with.
type connCaps struct {
	http, grpc int
	exceed     bool // the configured caps leave fewer than fdReserve files
}

// connCapsFor resolves http.max_connections and grpc.max_connections: a cap left 0
// comes from the open-file limit (nofile; 0 when unknown: 1024 assumed): of the files
// beyond fdReserve, REST gets half less its probe reserve (at most 8192) and gRPC a
// quarter (at most 2048), so that a flood of connections meets the cap before the
// process runs out of files (and cannot open its journal, or accept a probe).
func connCapsFor(cfg configs.File, nofile int) connCaps {
	if nofile <= 0 {
		nofile = 1024
	}
	avail := max(nofile-fdReserve, 64)
	c := connCaps{http: cfg.HTTP.MaxConnections, grpc: cfg.GRPC.MaxConnections}
	if c.http == 0 {
		c.http = min(max(avail/2-probeReserve, 16), 8192)
	}
	if c.grpc == 0 {
		c.grpc = min(max(avail/4, 8), 2048)
	}
	c.exceed = c.http+probeReserve+c.grpc+metricsConns > nofile-fdReserve
	return c
}

// exampleCurl is a ready-to-paste request for the first servable model with small
// inputs (the bundled MLP), or a metadata query otherwise; over HTTPS it adds -k (or
// pass --cacert), with auth the header (the token from $KILN_TOKEN).
func exampleCurl(scheme, addr string, auth bool, svc *serve.Service) string {
	opts := ""
	if scheme == "https" {
		opts += " -k"
	}
	if auth {
		opts += ` -H "Authorization: Bearer $KILN_TOKEN"`
	}
	host := addr
	if h, p, err := net.SplitHostPort(addr); err == nil && (h == "::" || h == "0.0.0.0" || h == "") {
		host = "localhost:" + p
	}
	for _, st := range svc.Index() {
		md, err := svc.ModelMetadata(st.Name, st.Version)
		if err != nil || len(md.Inputs) != 1 || md.Inputs[0].Datatype != "FP32" {
			continue
		}
		shape, n := []int64{}, int64(1)
		for _, d := range md.Inputs[0].Shape {
			if d < 0 {
				d = 1
			}
			shape, n = append(shape, d), n*d
		}
		if n > 64 {
			continue
		}
		data := "["
		for i := int64(0); i < n; i++ {
			if i > 0 {
				data += ","
			}
			data += fmt.Sprintf("%.1f", float64(i%7)/7)
		}
		data += "]"
		return fmt.Sprintf(`curl -s%s %s://%s/v2/models/%s/infer -H 'Content-Type: application/json' \
  -d '{"inputs":[{"name":"%s","datatype":"FP32","shape":%s,"data":%s}]}'`,
			opts, scheme, host, st.Name, md.Inputs[0].Name, jsonInts(shape), data)
	}
	return fmt.Sprintf("curl -s%s %s://%s/v2/repository/index -X POST", opts, scheme, host)
}

func jsonInts(v []int64) string {
	s := "["
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(x)
	}
	return s + "]"
}
