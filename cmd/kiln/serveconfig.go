package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kilnrt/kiln/configs"
)

// serveFlags are kiln serve's command-line flags. Each but --config has a key in the
// config file, which it overrides when the user sets it (pflag's Changed).
type serveFlags struct {
	config                                string
	repo, httpAddr, grpcAddr, metricsAddr string
	maxBody, grpcMaxMsg, maxInflight      string
	memoryLimit, requestMem, tensorMem    string
	compileTimeout                        time.Duration
	compiles                              int
	requestTimeout, grace                 time.Duration
	httpTimeouts                          [4]time.Duration // read header, read, write, idle
	httpMaxConns, grpcMaxConns            int
	grpcStreams                           int
	grpcIdle                              time.Duration
	threads, instances, specializeAfter   int
	loadMode                              string
	strictReadiness                       bool
	tlsCert, tlsKey, tokenFile            string
	logFormat, logLevel                   string
	controlMode                           string
	gpus                                  string
	precision                             string
	loadModels                            []string // Triton's --load-model
	tune                                  configs.Tune
	cache                                 cacheFlags
}

func (fl *serveFlags) register(f *pflag.FlagSet) {
	f.StringVar(&fl.config, "config", "", "the server config file (YAML; see configs/kiln.yaml); flags given on the command line override its keys")
	f.StringVar(&fl.repo, "model-repository", "", "the model repository (default: the bundled "+defaultRepository+") [model_repository]")
	f.StringVar(&fl.httpAddr, "http-address", ":8000", "REST listen address (empty: no REST) [http.address]")
	f.StringVar(&fl.grpcAddr, "grpc-address", ":8001", "gRPC listen address (empty: no gRPC) [grpc.address]")
	f.StringVar(&fl.metricsAddr, "metrics-address", ":8002", "Prometheus /metrics listen address, plain HTTP (empty: none) [metrics.address]")
	f.StringVar(&fl.maxBody, "max-request-bytes", "64MiB", "largest REST request body, after decompression [limits.max_request_bytes]")
	f.StringVar(&fl.grpcMaxMsg, "grpc-max-message-bytes", "256MiB", "largest gRPC message, either way [grpc.max_message_bytes]")
	f.StringVar(&fl.maxInflight, "max-inflight-bytes", "1GiB", "request bodies and messages held in memory at once, REST and gRPC together [limits.max_inflight_bytes]")
	f.StringVar(&fl.memoryLimit, "memory-limit", "0", "the Go runtime's soft memory limit, e.g. 3500MiB (0: GOMEMLIMIT, else none) [limits.memory_limit]")
	f.StringVar(&fl.requestMem, "max-request-memory", "0", "the tensors one inference may plan to hold; larger requests are refused before they run (0: half the memory the process may use) [limits.request_memory]")
	f.StringVar(&fl.tensorMem, "max-tensor-memory", "0", "one tensor of an inference (0: a quarter of the memory the process may use) [limits.tensor_memory]")
	f.DurationVar(&fl.compileTimeout, "compile-timeout", 10*time.Minute, "bound on one model's compile (0: none) [limits.compile_timeout]")
	f.IntVar(&fl.compiles, "compiles", 0, "models compiling at once (0: one per core) [limits.compiles]")
	f.DurationVar(&fl.httpTimeouts[0], "http-read-header-timeout", 10*time.Second, "a REST request's headers must arrive within this [http.read_header_timeout]")
	f.DurationVar(&fl.httpTimeouts[1], "http-read-timeout", time.Minute, "a REST request's body must arrive within this, else 408 (0: no bound) [http.read_timeout]")
	f.DurationVar(&fl.httpTimeouts[2], "http-write-timeout", time.Minute, "a REST response must be written within this, counted from the end of the inference (0: no bound) [http.write_timeout]")
	f.DurationVar(&fl.httpTimeouts[3], "http-idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long (0: never) [http.idle_timeout]")
	f.IntVar(&fl.httpMaxConns, "http-max-connections", 0, "REST connections open at once; at the cap the longest idle is closed for a new one (0: from the open-file limit) [http.max_connections]")
	f.IntVar(&fl.grpcStreams, "grpc-max-concurrent-streams", 128, "gRPC calls open at once on one connection [grpc.max_concurrent_streams]")
	f.DurationVar(&fl.grpcIdle, "grpc-idle-timeout", 10*time.Minute, "close a gRPC connection with no call open this long (0: never) [grpc.idle_timeout]")
	f.IntVar(&fl.grpcMaxConns, "grpc-max-connections", 0, "gRPC connections open at once; beyond, new ones are closed (0: from the open-file limit) [grpc.max_connections]")
	f.DurationVar(&fl.requestTimeout, "request-timeout", 0, "bound on a request's time in the server, e.g. 30s (0: none; a client's shorter gRPC deadline stays) [limits.request_timeout]")
	f.IntVar(&fl.threads, "threads", 0, "threads of the CPU device (0: every core) [threads]")
	f.StringVar(&fl.gpus, "gpus", "auto", "auto: KIND_GPU instance groups run on the CUDA GPUs (gpus: [N] is cuda:N), else on the OpenCL devices that kiln devices lists (gpus: [N] is opencl:N), each opened when a model first needs it; none: every instance on the CPU [gpus]")
	f.StringVar(&fl.precision, "precision", "", "float32 matrix products on the GPUs: fp32 (exact) or tf32 (CUDA sm_80 and later: tensor cores, inputs rounded to TF32, relative error about 1e-3) [precision]")
	f.IntVar(&fl.instances, "instances", 1, "requests one model version runs at once when its config.pbtxt sets no instance_group (the rest queue) [instances]")
	f.IntVar(&fl.specializeAfter, "specialize-after", 3, "models with free input dims: serve every shape from one generic executable and build a specialized one in the background after this many requests of a shape (0: compile each new shape before answering it) [specialize_after]")
	f.StringVar(&fl.controlMode, "model-control-mode", "none", "none (serve every model of the repository) or explicit (load/unload through the repository API) [model_control_mode]")
	f.StringArrayVar(&fl.loadModels, "load-model", nil, "with --model-control-mode explicit: a model to load at start (repeatable; * for every model) [load_models]")
	f.StringVar(&fl.loadMode, "load-mode", "background", "when models compile: background (at start, in the background; a request that comes first waits for it), eager (at start; the server is not ready until done) or lazy (on a model's first request) [load_mode]")
	f.BoolVar(&fl.strictReadiness, "strict-readiness", true, "the server is not ready while a model that should serve failed to load (false: it is ready anyway) [strict_readiness]")
	f.DurationVar(&fl.grace, "grace", 30*time.Second, "how long SIGTERM waits for requests in flight [shutdown_grace]")
	f.StringVar(&fl.tlsCert, "tls-cert-file", "", "PEM certificate (chain): serve HTTPS and gRPC over TLS, with --tls-key-file [tls.cert_file]")
	f.StringVar(&fl.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file [tls.key_file]")
	f.StringVar(&fl.tokenFile, "bearer-token-file", "", "file holding a token every request but the health probes must send as Authorization: Bearer <token> [auth.bearer_token_file]")
	f.StringVar(&fl.logFormat, "log-format", "", "json or console (default: the config file's, else $KILN_LOG_FORMAT, else console) [log.format]")
	f.StringVar(&fl.logLevel, "log-level", "info", "debug, info (one line per request), warn or error [log.level]")
	f.StringVar(&fl.tune.Mode, "tune", "off", "off, or background: while the server is idle (no request in flight or queued for --tune-idle-after), tune the models that receive traffic, most executed first, and swap in executables rebuilt with the records; tuning pauses when a request arrives [tune.mode]")
	f.StringVar(&fl.tune.CPU, "tune-cpu", "1", "the share of the idle time tuning may measure (1: all of it; 0.5: at most half), on the server's --threads (records apply to executables of the thread count they were measured at) [tune.cpu]")
	f.Var((*durationValue)(&fl.tune.Budget), "tune-budget", "measuring time per model (default 10m) [tune.budget]")
	f.IntVar(&fl.tune.Trials, "tune-trials", 0, "candidates measured per model (0: only --tune-budget bounds them) [tune.trials]")
	f.Var((*durationValue)(&fl.tune.IdleAfter), "tune-idle-after", "how long no request must be in flight or queued before the server counts as idle (default 2s) [tune.idle_after]")
	fl.cache.register(f, "on")
}

// durationValue is a configs.Duration as a flag.
type durationValue configs.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = durationValue(v)
	return err
}

// serveConfig is the configuration kiln serve runs with: the config file (or, without
// --config, the defaults of today's flags, with console logs unless $KILN_LOG_FORMAT
// says otherwise), then every flag the user set, then validation. Errors name the
// config key (and are usage errors: exit status 2).
func serveConfig(f *pflag.FlagSet, fl *serveFlags, getenv func(string) string) (configs.File, error) {
	var cfg configs.File
	if fl.config != "" {
		var err error
		if cfg, err = configs.LoadFile(fl.config); err != nil {
			return cfg, usageError{err}
		}
	} else {
		cfg = configs.DefaultFile()
		cfg.Log.Format = "console"
		if v := getenv("KILN_LOG_FORMAT"); v != "" {
			cfg.Log.Format = v
		}
	}
	set := f.Changed
	var errs []error
	size := func(flag, v string, dst *configs.Size) {
		n, err := parseBytes(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
		}
		*dst = configs.Size(n)
	}
	if set("model-repository") {
		cfg.ModelRepository = fl.repo
	}
	if set("http-address") {
		cfg.HTTP.Listener = configs.Listener{Address: fl.httpAddr, Enabled: fl.httpAddr != ""}
	}
	for i, d := range []*configs.Duration{&cfg.HTTP.ReadHeaderTimeout, &cfg.HTTP.ReadTimeout, &cfg.HTTP.WriteTimeout, &cfg.HTTP.IdleTimeout} {
		if set([]string{"http-read-header-timeout", "http-read-timeout", "http-write-timeout", "http-idle-timeout"}[i]) {
			*d = configs.Duration(fl.httpTimeouts[i])
		}
	}
	if set("http-max-connections") {
		cfg.HTTP.MaxConnections = fl.httpMaxConns
	}
	if set("grpc-max-concurrent-streams") {
		cfg.GRPC.MaxConcurrentStreams = fl.grpcStreams
	}
	if set("grpc-idle-timeout") {
		cfg.GRPC.IdleTimeout = configs.Duration(fl.grpcIdle)
	}
	if set("grpc-max-connections") {
		cfg.GRPC.MaxConnections = fl.grpcMaxConns
	}
	if set("max-inflight-bytes") {
		size("max-inflight-bytes", fl.maxInflight, &cfg.Limits.MaxInflightBytes)
	}
	if set("memory-limit") {
		size("memory-limit", fl.memoryLimit, &cfg.Limits.MemoryLimit)
	}
	if set("max-request-memory") {
		size("max-request-memory", fl.requestMem, &cfg.Limits.RequestMemory)
	}
	if set("max-tensor-memory") {
		size("max-tensor-memory", fl.tensorMem, &cfg.Limits.TensorMemory)
	}
	if set("compile-timeout") {
		cfg.Limits.CompileTimeout = configs.Duration(fl.compileTimeout)
	}
	if set("compiles") {
		cfg.Limits.Compiles = fl.compiles
	}
	if set("grpc-address") {
		cfg.GRPC.Address, cfg.GRPC.Enabled = fl.grpcAddr, fl.grpcAddr != ""
	}
	if set("metrics-address") {
		cfg.Metrics = configs.Listener{Address: fl.metricsAddr, Enabled: fl.metricsAddr != ""}
	}
	if set("max-request-bytes") {
		size("max-request-bytes", fl.maxBody, &cfg.Limits.MaxRequestBytes)
	}
	if set("grpc-max-message-bytes") {
		size("grpc-max-message-bytes", fl.grpcMaxMsg, &cfg.GRPC.MaxMessageBytes)
	}
	if set("request-timeout") {
		cfg.Limits.RequestTimeout = configs.Duration(fl.requestTimeout)
	}
	if set("threads") {
		cfg.Threads = fl.threads
	}
	if set("gpus") {
		cfg.GPUs = fl.gpus
	}
	if set("precision") {
		cfg.Precision = fl.precision
	}
	if set("model-control-mode") {
		cfg.ModelControlMode = fl.controlMode
	}
	if set("instances") {
		cfg.Instances = fl.instances
	}
	if set("specialize-after") {
		cfg.SpecializeAfter = fl.specializeAfter
	}
	if set("load-model") {
		cfg.LoadModels = fl.loadModels
	}
	if set("load-mode") {
		cfg.LoadMode = fl.loadMode
	}
	if set("strict-readiness") {
		cfg.StrictReadiness = fl.strictReadiness
	}
	if set("grace") {
		cfg.ShutdownGrace = configs.Duration(fl.grace)
	}
	if set("tune") {
		cfg.Tune.Mode = fl.tune.Mode
	}
	if set("tune-cpu") {
		cfg.Tune.CPU = fl.tune.CPU
	}
	if set("tune-budget") {
		cfg.Tune.Budget = fl.tune.Budget
	}
	if set("tune-trials") {
		cfg.Tune.Trials = fl.tune.Trials
	}
	if set("tune-idle-after") {
		cfg.Tune.IdleAfter = fl.tune.IdleAfter
	}
	if set("cache-dir") {
		cfg.Cache.Dir = fl.cache.dir
	}
	if set("cache") {
		cfg.Cache.Policy = fl.cache.policy
	}
	if set("cache-budget") {
		size("cache-budget", fl.cache.budget, &cfg.Cache.Budget)
	}
	if set("tls-cert-file") {
		cfg.TLS.CertFile = fl.tlsCert
	}
	if set("tls-key-file") {
		cfg.TLS.KeyFile = fl.tlsKey
	}
	if set("bearer-token-file") {
		cfg.Auth.BearerTokenFile = fl.tokenFile
	}
	if set("log-format") {
		cfg.Log.Format = fl.logFormat
	}
	if set("log-level") {
		cfg.Log.Level = fl.logLevel
	}
	if cfg.ModelRepository == "" && fl.config == "" {
		if _, err := os.Stat(defaultRepository); err != nil {
			return cfg, usageError{fmt.Errorf("no --model-repository given and the bundled %s is not here (run from the kiln source tree, or pass a repository)", defaultRepository)}
		}
		cfg.ModelRepository = defaultRepository
	}
	check := cfg
	if set("load-model") && cfg.ModelControlMode != "explicit" {
		errs = append(errs, fmt.Errorf("--load-model needs model_control_mode: explicit (--model-control-mode explicit); otherwise every model loads"))
		check.LoadModels = nil // reported once, naming the flag
	}
	if err := check.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

// cacheFlagsOf turns the merged cache keys back into cacheFlags, so that the journal
// opens exactly as the other commands open it.
func cacheFlagsOf(c configs.Cache) cacheFlags {
	return cacheFlags{dir: c.Dir, policy: c.Policy, budget: strconv.FormatInt(int64(c.Budget), 10)}
}

// newServeLogger builds the server's zap logger on stderr: JSON (for containers and
// log collectors: ISO 8601 times, lowercase levels) or console (as the other commands
// log), at the given level.
func newServeLogger(c configs.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, usageError{&configs.KeyError{Key: "log.level", Msg: err.Error()}}
	}
	var enc zapcore.Encoder
	switch c.Format {
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		ec.EncodeDuration = zapcore.SecondsDurationEncoder
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.TimeKey = ""
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, usageError{&configs.KeyError{Key: "log.format", Msg: fmt.Sprintf("%q: must be json or console", c.Format)}}
	}
	// Buffered: one write per 64 KiB or per second rather than one per line, which at
	// one line per request is a syscall per request. Errors and above flush at once
	// (zap syncs the core for them), and so does Sync at exit.
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(os.Stderr), Size: 64 << 10, FlushInterval: time.Second}
	return zap.New(zapcore.NewCore(enc, ws, level)), nil
}

// readBearerToken reads auth.bearer_token_file: the token is the file's content with
// surrounding whitespace (a trailing newline) removed; an empty token is an error.
func readBearerToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &configs.KeyError{Key: "auth.bearer_token_file", Msg: err.Error()}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", &configs.KeyError{Key: "auth.bearer_token_file", Msg: path + " is empty: it must hold the token"}
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", &configs.KeyError{Key: "auth.bearer_token_file", Msg: path + ": the token must be one word (no whitespace inside)"}
	}
	return tok, nil
}

// certReloadInterval is how often, at most, a TLS handshake checks the certificate
// files for a change.
const certReloadInterval = 10 * time.Second

// certFiles serves a certificate from tls.cert_file and tls.key_file and reloads it
// when either file changes (checked at most every certReloadInterval, on a
// handshake), so a rotated Kubernetes secret or cert-manager renewal needs no restart.
// A reload that fails keeps the previous certificate and logs a warning.
type certFiles struct {
	certPath, keyPath string
	log               *zap.Logger
	interval          time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // modification times and sizes of both files
	checked time.Time
}

func loadCertFiles(certPath, keyPath string, log *zap.Logger) (*certFiles, error) {
	c := &certFiles{certPath: certPath, keyPath: keyPath, log: log, interval: certReloadInterval}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) fileStamp() string {
	s := ""
	for _, p := range []string{c.certPath, c.keyPath} {
		if st, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%d/%d;", st.ModTime().UnixNano(), st.Size())
		}
	}
	return s
}

func (c *certFiles) load() error {
	stamp := c.fileStamp()
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return &configs.KeyError{Key: "tls.cert_file", Msg: fmt.Sprintf("%s with tls.key_file %s: %v", c.certPath, c.keyPath, err)}
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return nil
}

// getCertificate is tls.Config.GetCertificate.
func (c *certFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= c.interval {
		c.checked = time.Now()
		if c.fileStamp() != c.stamp {
			if err := c.load(); err != nil {
				c.log.Warn("TLS certificate changed but does not load; keeping the previous one", zap.Error(err))
			} else {
				c.log.Info("TLS certificate reloaded", zap.String("cert_file", c.certPath))
			}
		}
	}
	return c.cert, nil
}

// tlsConfig is the server side of TLS for both APIs (TLS 1.2 or later).
func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.getCertificate}
}
