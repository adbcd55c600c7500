package configs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kiln.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultFile(t *testing.T) {
	f := DefaultFile()
	checks := []struct {
		key       string
		got, want any
	}{
		{"http.address", f.HTTP.Address, ":8000"},
		{"http.enabled", f.HTTP.Enabled, true},
		{"http.read_header_timeout", f.HTTP.ReadHeaderTimeout, Duration(10 * time.Second)},
		{"http.read_timeout", f.HTTP.ReadTimeout, Duration(time.Minute)},
		{"http.write_timeout", f.HTTP.WriteTimeout, Duration(time.Minute)},
		{"http.idle_timeout", f.HTTP.IdleTimeout, Duration(2 * time.Minute)},
		{"http.max_connections", f.HTTP.MaxConnections, 0},
		{"grpc.address", f.GRPC.Address, ":8001"},
		{"grpc.enabled", f.GRPC.Enabled, true},
		{"grpc.max_message_bytes", f.GRPC.MaxMessageBytes, Size(256 << 20)},
		{"grpc.max_concurrent_streams", f.GRPC.MaxConcurrentStreams, 128},
		{"grpc.idle_timeout", f.GRPC.IdleTimeout, Duration(10 * time.Minute)},
		{"grpc.max_connections", f.GRPC.MaxConnections, 0},
		{"metrics.address", f.Metrics.Address, ":8002"},
		{"metrics.enabled", f.Metrics.Enabled, true},
		{"model_control_mode", f.ModelControlMode, "none"},
		{"load_mode", f.LoadMode, "background"},
		{"strict_readiness", f.StrictReadiness, true},
		{"load_models", len(f.LoadModels), 0},
		{"instances", f.Instances, 1},
		{"specialize_after", f.SpecializeAfter, 3},
		{"gpus", f.GPUs, "auto"},
		{"cache.policy", f.Cache.Policy, "on"},
		{"cache.budget", f.Cache.Budget, Size(0)},
		{"limits.max_request_bytes", f.Limits.MaxRequestBytes, Size(64 << 20)},
		{"limits.request_timeout", f.Limits.RequestTimeout, Duration(0)},
		{"limits.max_inflight_bytes", f.Limits.MaxInflightBytes, GiB},
		{"limits.memory_limit", f.Limits.MemoryLimit, Size(0)},
		{"limits.request_memory", f.Limits.RequestMemory, Size(0)},
		{"limits.tensor_memory", f.Limits.TensorMemory, Size(0)},
		{"limits.compile_timeout", f.Limits.CompileTimeout, Duration(10 * time.Minute)},
		{"limits.compiles", f.Limits.Compiles, 0},
		{"log.format", f.Log.Format, "json"},
		{"log.level", f.Log.Level, "info"},
		{"threads", f.Threads, 0},
		{"shutdown_grace", f.ShutdownGrace, Duration(30 * time.Second)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
	// The defaults are valid once the repository is known.
	f.ModelRepository = "/models"
	if err := f.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	p := writeFile(t, `# kiln serve --config kiln.yaml
model_repository: /models
http:
  address: "127.0.0.1:9000"
  read_timeout: 5s
  write_timeout: 0s
  idle_timeout: 30s
  max_connections: 500
grpc:
  enabled: false
  max_message_bytes: 1GiB
  max_concurrent_streams: 16
  idle_timeout: 1m
  max_connections: 100
metrics: {enabled: false}
model_control_mode: explicit
load_models: [mlp, "*"]
load_mode: eager
strict_readiness: false
instances: 4
specialize_after: 0
cache:
  dir: /var/cache/kiln
  policy: readonly
  budget: 2GiB
limits:
  max_request_bytes: 1048576
  request_timeout: 2m30s
  max_inflight_bytes: 512MiB
  memory_limit: 3GiB
tls:
  cert_file: /etc/kiln/tls.crt
  key_file: /etc/kiln/tls.key
auth:
  bearer_token_file: /etc/kiln/token
log:
  format: console
  level: debug
threads: 8
gpus: none
shutdown_grace: 5s
`)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := File{
		ModelRepository: "/models",
		HTTP: HTTP{Listener: Listener{Address: "127.0.0.1:9000", Enabled: true}, // enabled kept from the defaults
			ReadHeaderTimeout: Duration(10 * time.Second), ReadTimeout: Duration(5 * time.Second), IdleTimeout: Duration(30 * time.Second), MaxConnections: 500},
		GRPC:             GRPC{Address: ":8001", Enabled: false, MaxMessageBytes: GiB, MaxConcurrentStreams: 16, IdleTimeout: Duration(time.Minute), MaxConnections: 100},
		Metrics:          Listener{Address: ":8002", Enabled: false},
		ModelControlMode: "explicit",
		LoadModels:       []string{"mlp", "*"},
		LoadMode:         "eager",
		Instances:        4,
		SpecializeAfter:  0,
		Cache:            Cache{Dir: "/var/cache/kiln", Policy: "readonly", Budget: 2 * GiB},
		Limits:           Limits{MaxRequestBytes: MiB, RequestTimeout: Duration(150 * time.Second), MaxInflightBytes: 512 * MiB, MemoryLimit: 3 * GiB, CompileTimeout: Duration(10 * time.Minute)},
		TLS:              TLS{CertFile: "/etc/kiln/tls.crt", KeyFile: "/etc/kiln/tls.key"},
		Auth:             Auth{BearerTokenFile: "/etc/kiln/token"},
		Log:              Log{Format: "console", Level: "debug"},
		Tune:             DefaultFile().Tune, // left out: the defaults
		Threads:          8,
		GPUs:             "none",
		ShutdownGrace:    Duration(5 * time.Second),
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", f, want)
	}
	if err := f.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}

	// An empty file (or one holding only comments) is all defaults.
	for _, text := range []string{"", "# nothing\n", "~\n"} {
		f, err := LoadFile(writeFile(t, text))
		if err != nil || !reflect.DeepEqual(f, DefaultFile()) {
			t.Errorf("%q: %+v, %v", text, f, err)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unknown top-level key", "model_repo: /models\n", []string{"line 1", "unknown key model_repo"}},
		{"unknown nested key", "http:\n  adress: \":80\"\n", []string{"line 2", "unknown key http.adress"}},
		{"bad size unit", "cache:\n  budget: 2GB5\n", []string{"line 2", "cache.budget", `invalid size "2GB5"`}},
		{"negative size", "limits: {max_request_bytes: -5}\n", []string{"limits.max_request_bytes", "invalid size"}},
		{"size too large", "cache: {budget: 9000000TiB}\n", []string{"cache.budget", "too large"}},
		{"size as a list", "cache: {budget: [1]}\n", []string{"size must be a scalar"}},
		{"duration without unit", "shutdown_grace: 30\n", []string{"line 1", "shutdown_grace", `invalid duration "30"`}},
		{"bad duration", "limits:\n  request_timeout: soon\n", []string{"line 2", "limits.request_timeout", "invalid duration"}},
		{"wrong type", "threads: many\n", []string{"threads", "cannot unmarshal"}},
		{"two documents", "threads: 1\n---\nthreads: 2\n", []string{"more than one YAML document"}},
		{"not a mapping", "- a\n", []string{"cannot unmarshal"}},
		{"syntax", "http: [\n", []string{"yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(writeFile(t, tc.text))
			if !errors.Is(err, ErrServerConfig) {
				t.Fatalf("err = %v, want one wrapping ErrServerConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "absent.yaml")); !errors.Is(err, ErrServerConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := writeFile(t, "threads: 1\n"+strings.Repeat("#", MaxFileBytes))
	if _, err := LoadFile(big); !errors.Is(err, ErrServerConfig) {
		t.Errorf("oversized file: %v", err)
	}
}

func TestFileValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(f *File)
		key  string
	}{
		{"no repository", func(f *File) { f.ModelRepository = "" }, "model_repository"},
		{"bad http address", func(f *File) { f.HTTP.Address = "8000" }, "http.address"},
		{"bad port", func(f *File) { f.GRPC.Address = ":http" }, "grpc.address"},
		{"port out of range", func(f *File) { f.Metrics.Address = "localhost:70000" }, "metrics.address"},
		{"same address twice", func(f *File) { f.GRPC.Address = ":8000" }, "grpc.address"},
		{"nothing served", func(f *File) { f.HTTP.Enabled, f.GRPC.Enabled = false, false }, "http.enabled"},
		{"zero grpc message", func(f *File) { f.GRPC.MaxMessageBytes = 0 }, "grpc.max_message_bytes"},
		{"huge grpc message", func(f *File) { f.GRPC.MaxMessageBytes = 4 * GiB }, "grpc.max_message_bytes"},
		{"control mode", func(f *File) { f.ModelControlMode = "poll" }, "model_control_mode"},
		{"load mode", func(f *File) { f.LoadMode = "later" }, "load_mode"},
		{"models to load without explicit control", func(f *File) { f.LoadModels = []string{"mlp"} }, "load_models"},
		{"empty model to load", func(f *File) { f.ModelControlMode, f.LoadModels = "explicit", []string{"mlp", ""} }, "load_models[1]"},
		{"negative instances", func(f *File) { f.Instances = -1 }, "instances"},
		{"gpus by number", func(f *File) { f.GPUs = "0,1" }, "gpus"},
		{"negative specialize_after", func(f *File) { f.SpecializeAfter = -1 }, "specialize_after"},
		{"unknown tune.mode", func(f *File) { f.Tune.Mode = "always" }, "tune.mode"},
		{"tune.cpu above the whole idle time", func(f *File) { f.Tune.CPU = "1.5" }, "tune.cpu"},
		{"tune.cpu as a thread count", func(f *File) { f.Tune.CPU = "2" }, "tune.cpu"},
		{"zero tune.cpu", func(f *File) { f.Tune.CPU = "0" }, "tune.cpu"},
		{"cache policy", func(f *File) { f.Cache.Policy = "write-only" }, "cache.policy"},
		{"negative budget", func(f *File) { f.Cache.Budget = -1 }, "cache.budget"},
		{"zero request limit", func(f *File) { f.Limits.MaxRequestBytes = 0 }, "limits.max_request_bytes"},
		{"negative timeout", func(f *File) { f.Limits.RequestTimeout = Duration(-time.Second) }, "limits.request_timeout"},
		{"zero inflight bytes", func(f *File) { f.Limits.MaxInflightBytes = 0 }, "limits.max_inflight_bytes"},
		{"memory limit below the budget", func(f *File) { f.Limits.MemoryLimit = 512 * MiB }, "limits.memory_limit"},
		{"negative request memory", func(f *File) { f.Limits.RequestMemory = -1 }, "limits.request_memory"},
		{"negative tensor memory", func(f *File) { f.Limits.TensorMemory = -1 }, "limits.tensor_memory"},
		{"negative compile timeout", func(f *File) { f.Limits.CompileTimeout = Duration(-time.Second) }, "limits.compile_timeout"},
		{"negative compiles", func(f *File) { f.Limits.Compiles = -1 }, "limits.compiles"},
		{"no header timeout", func(f *File) { f.HTTP.ReadHeaderTimeout = 0 }, "http.read_header_timeout"},
		{"negative read timeout", func(f *File) { f.HTTP.ReadTimeout = Duration(-time.Second) }, "http.read_timeout"},
		{"negative write timeout", func(f *File) { f.HTTP.WriteTimeout = Duration(-time.Second) }, "http.write_timeout"},
		{"negative idle timeout", func(f *File) { f.HTTP.IdleTimeout = Duration(-time.Second) }, "http.idle_timeout"},
		{"negative grpc idle timeout", func(f *File) { f.GRPC.IdleTimeout = Duration(-time.Second) }, "grpc.idle_timeout"},
		{"negative connection cap", func(f *File) { f.HTTP.MaxConnections = -1 }, "http.max_connections"},
		{"negative grpc connection cap", func(f *File) { f.GRPC.MaxConnections = -1 }, "grpc.max_connections"},
		{"zero streams", func(f *File) { f.GRPC.MaxConcurrentStreams = 0 }, "grpc.max_concurrent_streams"},
		{"cert without key", func(f *File) { f.TLS.CertFile = "/c" }, "tls.key_file"},
		{"key without cert", func(f *File) { f.TLS.KeyFile = "/k" }, "tls.cert_file"},
		{"log format", func(f *File) { f.Log.Format = "xml" }, "log.format"},
		{"log level", func(f *File) { f.Log.Level = "verbose" }, "log.level"},
		{"negative threads", func(f *File) { f.Threads = -1 }, "threads"},
		{"negative grace", func(f *File) { f.ShutdownGrace = Duration(-time.Second) }, "shutdown_grace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFile()
			f.ModelRepository = "/models"
			tc.edit(&f)
			err := f.Validate()
			var ke *KeyError
			if !errors.Is(err, ErrServerConfig) || !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("err = %v, want a *KeyError for %s", err, tc.key)
			}
			if !strings.Contains(err.Error(), tc.key+": ") {
				t.Errorf("message %q does not name %s", err, tc.key)
			}
		})
	}
	// A disabled endpoint's address is not checked.
	f := DefaultFile()
	f.ModelRepository = "/models"
	f.Metrics = Listener{Address: "nonsense", Enabled: false}
	if err := f.Validate(); err != nil {
		t.Errorf("disabled metrics: %v", err)
	}
	// Port 0 (an ephemeral port, as tests use) may appear on several endpoints.
	f = DefaultFile()
	f.ModelRepository = "/models"
	f.HTTP.Address, f.GRPC.Address, f.Metrics.Address = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if err := f.Validate(); err != nil {
		t.Errorf("three listeners on 127.0.0.1:0: %v", err)
	}
}

func TestSize(t *testing.T) {
	good := map[string]Size{
		"0": 0, "1024": 1024, "64MiB": 64 << 20, "2GiB": 2 << 30, "2gib": 2 << 30, "1.5GiB": 3 << 29,
		"10KB": 10000, "3 MB": 3000000, "1TB": 1e12, "1TiB": 1 << 40, "7B": 7, "512kib": 512 << 10,
	}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "MiB", "1.5.5GB", "12XB", "1e9", "0x10", "99999999999999999999", "9000000TiB"} {
		if got, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", s, got)
		}
	}
	for size, want := range map[Size]string{0: "0", 1000: "1000", 1024: "1KiB", 64 << 20: "64MiB", 3 << 29: "1536MiB", 1 << 40: "1TiB"} {
		if size.String() != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(size), size.String(), want)
		}
	}
	// Sizes and durations marshal to strings that load back.
	f := DefaultFile()
	f.Cache.Budget = 3 << 29
	f.Limits.RequestTimeout = Duration(1500 * time.Millisecond)
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "budget: 1536MiB") || !strings.Contains(string(out), "request_timeout: 1.5s") {
		t.Errorf("marshalled:\n%s", out)
	}
	back, err := LoadFile(writeFile(t, string(out)))
	if err != nil || !reflect.DeepEqual(back, f) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
