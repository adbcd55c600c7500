package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrServerConfig is wrapped by every error about the server's config file.
var ErrServerConfig = errors.New("invalid server config")

// MaxFileBytes bounds the size of a server config file.
const MaxFileBytes = 1 << 20

// File is the server's config file (YAML). Every key is optional: DefaultFile gives
// the value of each one left out. Keys are snake_case as shown in the yaml tags; an
// unknown key is an error.
type File struct {
	// ModelRepository is the directory holding <model>/<version>/model.onnx and
	// <model>/config.pbtxt. Required (the command may set it from a flag).
	ModelRepository string `yaml:"model_repository"`

	HTTP    HTTP     `yaml:"http"`    // REST (Open Inference Protocol), default ":8000"
	GRPC    GRPC     `yaml:"grpc"`    // gRPC (Open Inference Protocol), default ":8001"
	Metrics Listener `yaml:"metrics"` // Prometheus /metrics, default ":8002"

	// ModelControlMode is "none" (serve what the repository holds at start) or
	// "explicit" (models are loaded and unloaded through the repository API).
	ModelControlMode string `yaml:"model_control_mode"`
	// LoadModels are the models loaded at start with model_control_mode explicit
	// (Triton's --load-model); "*" loads every model. Empty: none.
	LoadModels []string `yaml:"load_models,omitempty"`
	// LoadMode is when models compile: "background" (default: at start, in the
	// background; the server is ready meanwhile and a request that comes first waits
	// for that same compile), "eager" (at start; the server is not ready until they
	// have) or "lazy" (on a model's first request).
	LoadMode string `yaml:"load_mode"`
	// StrictReadiness (default true, as Triton's --strict-readiness): the server is
	// not ready while a model that should serve failed to load. false: it is.
	StrictReadiness bool `yaml:"strict_readiness"`
	// Instances is how many requests one model version runs at once when its
	// config.pbtxt has no instance_group; the rest queue. Default 1; 0 means 1.
	Instances int `yaml:"instances"`
	// SpecializeAfter: a model with free input dims is served from one generic
	// executable, and a shape requested this many times gets an executable specialized
	// for it, built in the background (default 3). 0 compiles each new shape before
	// answering it.
	SpecializeAfter int `yaml:"specialize_after"`

	Cache  Cache  `yaml:"cache"`
	Limits Limits `yaml:"limits"`
	TLS    TLS    `yaml:"tls"`
	Auth   Auth   `yaml:"auth"`
	Log    Log    `yaml:"log"`
	Tune   Tune   `yaml:"tune"`

	// Threads is the number of threads kernels run on; 0 means one per core.
	Threads int `yaml:"threads"`
	// GPUs is "auto" (KIND_GPU instance groups run on the CUDA GPUs, else on the OpenCL
	// devices kiln finds, numbered as `kiln devices` lists them, each opened when a model
	// first needs it)
	// or "none" (every instance runs on the CPU).
	GPUs string `yaml:"gpus"`
	// Precision is the GPU engines' arithmetic for float32 matrix products: "fp32" or
	// "" (exact, the default) or "tf32" (tensor cores of CUDA GPUs of sm_80 and later;
	// other devices build fp32).
	Precision string `yaml:"precision"`
	// ShutdownGrace is how long requests in flight may finish after SIGTERM.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
}

// Listener is an endpoint the server may listen on.
type Listener struct {
	Address string `yaml:"address"` // host:port; an empty host means every interface
	Enabled bool   `yaml:"enabled"`
}

// HTTP is the REST endpoint and how long it waits for clients.
type HTTP struct {
	Listener `yaml:",inline"`
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a request's body, from the end of its headers
	// (default 60s); a slower body gets 408 and its connection is closed. 0: none.
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response (default 60s), counted from the end of
	// the inference, so it never cuts a long one (limits.request_timeout does). 0:
	// none.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection that waits this long for its next
	// request (default 120s). 0: never.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConnections caps the open connections; at the cap, the connection idle the
	// longest is closed for a new one, and a few more are kept for health probes.
	// 0 (default): from the open-file limit.
	MaxConnections int `yaml:"max_connections"`
}

// GRPC is the gRPC endpoint.
type GRPC struct {
	Address string `yaml:"address"`
	Enabled bool   `yaml:"enabled"`
	// MaxMessageBytes bounds a request or response message (default 256MiB).
	MaxMessageBytes Size `yaml:"max_message_bytes"`
	// MaxConcurrentStreams bounds the calls open at once on one connection
	// (default 128).
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// IdleTimeout closes a connection with no call open for this long (default
	// 10m). 0: never.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConnections caps the open connections; beyond it a new connection is closed
	// at once. 0 (default): from the open-file limit.
	MaxConnections int `yaml:"max_connections"`
}

// Cache configures the binary journal of compiled models.
type Cache struct {
	// Dir is the journal's directory; empty means the default ($XDG_CACHE_HOME/kiln).
	Dir string `yaml:"dir"`
	// Policy is "on" (default), "readonly", "redo" or "off", as compilecache defines them.
	Policy string `yaml:"policy"`
	// Budget bounds the journal's size on disk; 0 means no bound.
	Budget Size `yaml:"budget"`
}

// Limits bound what one request may cost.
type Limits struct {
	// MaxRequestBytes bounds an HTTP request body (default 64MiB).
	MaxRequestBytes Size `yaml:"max_request_bytes"`
	// RequestTimeout bounds a request's time in the server; 0 means no bound.
	RequestTimeout Duration `yaml:"request_timeout"`
	// MaxInflightBytes bounds the request bodies and messages held in memory at once,
	// REST and gRPC together (default 1GiB); a request waits for its share, and one
	// larger than the bound runs alone.
	MaxInflightBytes Size `yaml:"max_inflight_bytes"`
	// MemoryLimit is the Go runtime's soft memory limit (debug.SetMemoryLimit): near
	// it, garbage is collected before the heap grows further, so that a burst of
	// large requests does not stack up garbage on top of the data they hold. 0
	// (default): the runtime's own (the GOMEMLIMIT environment variable, else none).
	// Set it below the container's memory limit.
	MemoryLimit Size `yaml:"memory_limit"`
	// RequestMemory bounds the memory one inference plans to use (its tensors); a
	// request above it is refused before it runs, a model whose fixed plan is above it
	// does not load. 0 (default): half the memory the process may use (its cgroup's
	// limit, else the machine's).
	RequestMemory Size `yaml:"request_memory"`
	// TensorMemory bounds one tensor of an inference. 0 (default): a quarter of the
	// memory the process may use.
	TensorMemory Size `yaml:"tensor_memory"`
	// CompileTimeout bounds one model's compile (default 10m); 0 means no bound.
	CompileTimeout Duration `yaml:"compile_timeout"`
	// Compiles is how many models compile at once; 0 (default): one per core.
	Compiles int `yaml:"compiles"`
}

// TLS, when both files are set, makes the HTTP and gRPC endpoints serve TLS.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Auth, when BearerTokenFile is set, requires "Authorization: Bearer <token>" on every
// request but health probes; the file holds the token.
type Auth struct {
	BearerTokenFile string `yaml:"bearer_token_file"`
}

// Log configures the server's logs.
type Tune struct {
	// Mode is "off" (default) or "background": while the server is idle, tune the
	// models that receive traffic and swap in executables rebuilt with the records.
	Mode string `yaml:"mode"`
	// CPU is what tuning may use: a thread count ("1", the default; "2") or a
	// fraction of one core ("0.5": one thread, measuring at most half the idle time).
	CPU string `yaml:"cpu"`
	// Budget is each model's measuring time (default 10m); Trials bounds its
	// candidates (0: only the budget does).
	Budget Duration `yaml:"budget"`
	Trials int      `yaml:"trials"`
	// IdleAfter is how long no request must have been in flight or queued before the
	// server counts as idle (default 2s).
	IdleAfter Duration `yaml:"idle_after"`
}

// Log is the server's logging.
type Log struct {
	Format string `yaml:"format"` // "json" (default) or "console"
	Level  string `yaml:"level"`  // "debug", "info" (default), "warn" or "error"
}

// DefaultFile returns the configuration used for every key a file leaves out.
func DefaultFile() File {
	return File{
		HTTP: HTTP{Listener: Listener{Address: ":8000", Enabled: true}, ReadHeaderTimeout: Duration(10 * time.Second),
			ReadTimeout: Duration(time.Minute), WriteTimeout: Duration(time.Minute), IdleTimeout: Duration(2 * time.Minute)},
		GRPC:             GRPC{Address: ":8001", Enabled: true, MaxMessageBytes: 256 * MiB, MaxConcurrentStreams: 128, IdleTimeout: Duration(10 * time.Minute)},
		Metrics:          Listener{Address: ":8002", Enabled: true},
		ModelControlMode: "none",
		LoadMode:         "background",
		StrictReadiness:  true,
		Instances:        1,
		SpecializeAfter:  3,
		GPUs:             "auto",
		Cache:            Cache{Policy: "on"},
		Limits:           Limits{MaxRequestBytes: 64 * MiB, MaxInflightBytes: GiB, CompileTimeout: Duration(10 * time.Minute)},
		Log:              Log{Format: "json", Level: "info"},
		Tune:             Tune{Mode: "off", CPU: "1", Budget: Duration(10 * time.Minute), IdleAfter: Duration(2 * time.Second)},
		ShutdownGrace:    Duration(30 * time.Second),
	}
}

// LoadFile reads a YAML config file over DefaultFile: keys in the file replace the
// defaults, keys left out keep them. Unknown keys, malformed values and more than
// one YAML document are errors (wrapping ErrServerConfig, with the line). The result
// is not validated: the command applies its flags, then calls Validate. On error the
// defaults are returned with it.
func LoadFile(path string) (File, error) {
	f := DefaultFile()
	fh, err := os.Open(path)
	if err != nil {
		return f, fmt.Errorf("%w: %w", ErrServerConfig, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return f, fmt.Errorf("%w: %v", ErrServerConfig, err)
	}
	if len(data) > MaxFileBytes {
		return f, fmt.Errorf("%w: %s is larger than %s", ErrServerConfig, path, Size(MaxFileBytes))
	}
	if err := decodeFile(data, &f); err != nil {
		return DefaultFile(), fmt.Errorf("%w: %s: %v", ErrServerConfig, path, err)
	}
	if len(f.LoadModels) == 0 {
		f.LoadModels = nil // "load_models: []" is the default, no list
	}
	return f, nil
}

// decodeFile decodes one YAML document into f, keeping the values of absent keys.
func decodeFile(data []byte, f *File) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file: all defaults
		}
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return err
		}
		keys := keysByLine(data)
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			if sm := lineRE.FindStringSubmatch(m); sm != nil {
				n, _ := strconv.Atoi(sm[1])
				switch key := keys[n]; {
				case key != "" && notFoundRE.MatchString(sm[2]):
					m = fmt.Sprintf("line %d: unknown key %s", n, key)
				case key != "":
					m = fmt.Sprintf("line %d: %s: %s", n, key, sm[2])
				}
			}
			m = notFoundRE.ReplaceAllString(m, "unknown key $1")
			msgs[i] = m
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	return nil
}

var (
	notFoundRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
	lineRE     = regexp.MustCompile(`^line (\d+): (?s)(.*)$`)
)

// keysByLine maps the line of each key in a YAML document to its dotted path, so that
// errors the decoder reports by line can name the key (the innermost key of a line).
func keysByLine(data []byte) map[int]string {
	keys := map[int]string{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return keys
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := joinPath(path, k.Value)
				keys[k.Line] = p // the innermost key of a line wins
				walk(v, p)
			}
		}
	}
	walk(&doc, "")
	return keys
}

// Validate checks every key and returns all problems, each naming its key (joined
// with errors.Join; errors.Is(err, ErrServerConfig) holds).
func (f File) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if f.ModelRepository == "" {
		bad("model_repository", "must be set")
	}
	addrs := map[string]string{}
	for _, l := range []struct {
		key     string
		address string
		enabled bool
	}{{"http", f.HTTP.Address, f.HTTP.Enabled}, {"grpc", f.GRPC.Address, f.GRPC.Enabled}, {"metrics", f.Metrics.Address, f.Metrics.Enabled}} {
		if !l.enabled {
			continue
		}
		if err := checkAddress(l.address); err != nil {
			bad(l.key+".address", "%v", err)
			continue
		}
		if _, port, _ := net.SplitHostPort(l.address); port == "0" {
			continue // an ephemeral port: each listener gets its own
		}
		if other, dup := addrs[l.address]; dup {
			bad(l.key+".address", "%q is also %s.address", l.address, other)
		}
		addrs[l.address] = l.key
	}
	if !f.HTTP.Enabled && !f.GRPC.Enabled {
		bad("http.enabled", "http and grpc are both disabled: the server would serve nothing")
	}
	if f.GRPC.MaxMessageBytes <= 0 || f.GRPC.MaxMessageBytes > math.MaxInt32 {
		bad("grpc.max_message_bytes", "%s: must be positive and below 2GiB (a protobuf message limit)", f.GRPC.MaxMessageBytes)
	}
	if f.GRPC.MaxConcurrentStreams <= 0 || f.GRPC.MaxConcurrentStreams > math.MaxInt32 {
		bad("grpc.max_concurrent_streams", "%d: must be positive", f.GRPC.MaxConcurrentStreams)
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"http.read_timeout", f.HTTP.ReadTimeout}, {"http.write_timeout", f.HTTP.WriteTimeout}, {"http.idle_timeout", f.HTTP.IdleTimeout}, {"grpc.idle_timeout", f.GRPC.IdleTimeout}} {
		if d.v < 0 {
			bad(d.key, "%s: must not be negative (0 means no timeout)", d.v)
		}
	}
	if f.HTTP.ReadHeaderTimeout <= 0 {
		bad("http.read_header_timeout", "%s: must be positive (a client that never finishes its headers would hold a connection)", f.HTTP.ReadHeaderTimeout)
	}
	if f.HTTP.MaxConnections < 0 {
		bad("http.max_connections", "%d: must be 0 (from the open-file limit) or positive", f.HTTP.MaxConnections)
	}
	if f.GRPC.MaxConnections < 0 {
		bad("grpc.max_connections", "%d: must be 0 (from the open-file limit) or positive", f.GRPC.MaxConnections)
	}
	if f.ModelControlMode != "none" && f.ModelControlMode != "explicit" {
		bad("model_control_mode", "%q: must be none or explicit", f.ModelControlMode)
	}
	if len(f.LoadModels) > 0 && f.ModelControlMode != "explicit" {
		bad("load_models", "%q: needs model_control_mode: explicit; otherwise every model loads", f.LoadModels)
	}
	for i, m := range f.LoadModels {
		if m == "" {
			bad(fmt.Sprintf("load_models[%d]", i), "must be a model name or *")
		}
	}
	if f.LoadMode != "lazy" && f.LoadMode != "eager" && f.LoadMode != "background" {
		bad("load_mode", "%q: must be background, eager or lazy", f.LoadMode)
	}
	if f.GPUs != "auto" && f.GPUs != "none" {
		bad("gpus", "%q: must be auto or none", f.GPUs)
	}
	if f.Instances < 0 {
		bad("instances", "%d: must not be negative (0 or 1: one request at a time)", f.Instances)
	}
	if f.SpecializeAfter < 0 {
		bad("specialize_after", "%d: must not be negative (0: compile each new shape before answering it)", f.SpecializeAfter)
	}
	if f.Tune.Mode != "off" && f.Tune.Mode != "background" {
		bad("tune.mode", "%q: must be off or background", f.Tune.Mode)
	}
	if c, err := strconv.ParseFloat(f.Tune.CPU, 64); err != nil || !(c > 0) || c > 1 {
		bad("tune.cpu", "%q: must be the share of the idle time tuning may measure (0 < cpu <= 1)", f.Tune.CPU)
	}
	if f.Tune.Budget <= 0 {
		bad("tune.budget", "%s: must be positive", f.Tune.Budget)
	}
	if f.Tune.Trials < 0 {
		bad("tune.trials", "%d: must not be negative (0: only the budget bounds them)", f.Tune.Trials)
	}
	if f.Tune.IdleAfter <= 0 {
		bad("tune.idle_after", "%s: must be positive", f.Tune.IdleAfter)
	}
	switch f.Cache.Policy {
	case "on", "readonly", "redo", "off":
	default:
		bad("cache.policy", "%q: must be on, readonly, redo or off", f.Cache.Policy)
	}
	if f.Cache.Budget < 0 {
		bad("cache.budget", "%s: must not be negative", f.Cache.Budget)
	}
	if f.Limits.MaxRequestBytes <= 0 {
		bad("limits.max_request_bytes", "%s: must be positive", f.Limits.MaxRequestBytes)
	}
	if f.Limits.MaxInflightBytes <= 0 {
		bad("limits.max_inflight_bytes", "%s: must be positive", f.Limits.MaxInflightBytes)
	}
	if f.Limits.MemoryLimit < 0 {
		bad("limits.memory_limit", "%s: must not be negative (0 leaves the runtime's)", f.Limits.MemoryLimit)
	}
	if f.Limits.RequestMemory < 0 {
		bad("limits.request_memory", "%s: must not be negative (0: half the memory the process may use)", f.Limits.RequestMemory)
	}
	if f.Limits.TensorMemory < 0 {
		bad("limits.tensor_memory", "%s: must not be negative (0: a quarter of the memory the process may use)", f.Limits.TensorMemory)
	}
	if f.Limits.CompileTimeout < 0 {
		bad("limits.compile_timeout", "%v: must not be negative (0: no bound)", time.Duration(f.Limits.CompileTimeout))
	}
	if f.Limits.Compiles < 0 {
		bad("limits.compiles", "%d: must not be negative (0: one per core)", f.Limits.Compiles)
	} else if f.Limits.MemoryLimit > 0 && f.Limits.MemoryLimit <= f.Limits.MaxInflightBytes {
		bad("limits.memory_limit", "%s: must be above limits.max_inflight_bytes (%s), which requests may hold on their own", f.Limits.MemoryLimit, f.Limits.MaxInflightBytes)
	}
	if f.Limits.RequestTimeout < 0 {
		bad("limits.request_timeout", "%s: must not be negative (0 means no timeout)", f.Limits.RequestTimeout)
	}
	if (f.TLS.CertFile == "") != (f.TLS.KeyFile == "") {
		if f.TLS.CertFile == "" {
			bad("tls.cert_file", "must be set with tls.key_file")
		} else {
			bad("tls.key_file", "must be set with tls.cert_file")
		}
	}
	if f.Log.Format != "json" && f.Log.Format != "console" {
		bad("log.format", "%q: must be json or console", f.Log.Format)
	}
	switch f.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: must be debug, info, warn or error", f.Log.Level)
	}
	if f.Precision != "" && f.Precision != "fp32" && f.Precision != "tf32" {
		bad("precision", "%q: must be fp32 or tf32", f.Precision)
	}
	if f.Threads < 0 {
		bad("threads", "%d: must be 0 (one per core) or positive", f.Threads)
	}
	if f.ShutdownGrace < 0 {
		bad("shutdown_grace", "%s: must not be negative", f.ShutdownGrace)
	}
	return errors.Join(errs...)
}

// A KeyError is a server config value that breaks a rule; Key is its dotted YAML path.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return "server config: " + e.Key + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrServerConfig) true.
func (e *KeyError) Unwrap() error { return ErrServerConfig }

// checkAddress accepts host:port with a numeric port; the host may be empty.
func checkAddress(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q: want host:port, as in \":8000\" or \"127.0.0.1:8000\"", a)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 && port != "0" {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", a)
	}
	return nil
}

// Byte size units.
const (
	KiB Size = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// Size is a number of bytes. In YAML it is a plain integer (bytes) or a number with a
// unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024),
// case-insensitive, as in "64MiB", "1.5GB" or "2 GiB".
type Size int64

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

// ParseSize reads a size as Size's YAML form does.
func ParseSize(s string) (Size, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q: want bytes or a number with a unit, as in 64MiB", s)
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, m[2])
	}
	if !strings.Contains(m[1], ".") { // exact integer arithmetic where possible
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err == nil && int64(unit) > 0 && n <= math.MaxInt64/int64(unit) {
			return Size(n * int64(unit)), nil
		}
	}
	x, err := strconv.ParseFloat(m[1], 64)
	if err != nil || x*unit >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(x * unit), nil
}

// String writes the size in the largest binary unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		n    Size
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if s != 0 && s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// UnmarshalYAML reads a plain integer or a string with a unit.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a size must be a scalar such as 64MiB", n.Line)}}
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*s = v
	return nil
}

// MarshalYAML writes the size as String does.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// Duration is a time.Duration written in YAML as a Go duration string ("30s",
// "1m30s", "250ms"); a bare number other than 0 is refused, since its unit would be a
// guess.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a duration must be a scalar such as 30s", n.Line)}}
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q: want a number with a unit, as in 30s or 1m30s", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// joinPath joins a dotted key path and one more key.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
