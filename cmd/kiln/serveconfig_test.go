package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/configs"
)

// parseServe parses kiln serve's flags from args and merges them as the command does.
func parseServe(t *testing.T, env map[string]string, args ...string) (configs.File, error) {
	t.Helper()
	var fl serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fl.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return serveConfig(fs, &fl, func(k string) string { return env[k] })
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeConfigDefaults: without --config, kiln serve runs as before the config file
// existed (console logs, the flags' defaults), and $KILN_LOG_FORMAT picks the format.
func TestServeConfigDefaults(t *testing.T) {
	cfg, err := parseServe(t, nil, "--model-repository", "/models")
	if err != nil {
		t.Fatal(err)
	}
	want := configs.DefaultFile()
	want.ModelRepository = "/models"
	want.Log.Format = "console"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
	cfg, err = parseServe(t, map[string]string{"KILN_LOG_FORMAT": "json"}, "--model-repository", "/models")
	if err != nil || cfg.Log.Format != "json" {
		t.Errorf("KILN_LOG_FORMAT=json: %q %v", cfg.Log.Format, err)
	}
	// the flag beats the environment
	cfg, err = parseServe(t, map[string]string{"KILN_LOG_FORMAT": "json"}, "--model-repository", "/models", "--log-format", "console")
	if err != nil || cfg.Log.Format != "console" {
		t.Errorf("--log-format console over KILN_LOG_FORMAT=json: %q %v", cfg.Log.Format, err)
	}
	// as today: empty addresses switch gRPC and metrics off; now REST too
	cfg, err = parseServe(t, nil, "--model-repository", "/models", "--grpc-address", "", "--metrics-address", "")
	if err != nil || cfg.GRPC.Enabled || cfg.Metrics.Enabled || !cfg.HTTP.Enabled {
		t.Errorf("gRPC and metrics off: %+v %v", cfg, err)
	}
	// the tests' and the load generator's command line: three listeners on port 0
	if _, err := parseServe(t, nil, "--model-repository", "/m", "--http-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"); err != nil {
		t.Errorf("ephemeral ports: %v", err)
	}
}

// TestServeConfigFileAndFlags: every key of the file reaches the configuration, and a
// flag set on the command line overrides its key (and only then).
func TestServeConfigFileAndFlags(t *testing.T) {
	file := writeTemp(t, "kiln.yaml", `
model_repository: /from/file
http: {address: "127.0.0.1:9000", read_timeout: 5s, max_connections: 300}
grpc: {address: "127.0.0.1:9001", max_message_bytes: 32MiB, max_concurrent_streams: 32, idle_timeout: 1m, max_connections: 50}
metrics: {enabled: false}
model_control_mode: explicit
load_mode: eager
strict_readiness: false
cache: {dir: /var/cache/kiln, policy: readonly, budget: 2GiB}
limits: {max_request_bytes: 1MiB, request_timeout: 45s, max_inflight_bytes: 512MiB, memory_limit: 2GiB, request_memory: 1GiB, tensor_memory: 256MiB, compile_timeout: 2m, compiles: 3}
tls: {cert_file: /tls/crt, key_file: /tls/key}
auth: {bearer_token_file: /secret/token}
log: {format: console, level: warn}
threads: 3
gpus: none
shutdown_grace: 10s
`)
	cfg, err := parseServe(t, map[string]string{"KILN_LOG_FORMAT": "json"}, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	want := configs.File{
		ModelRepository: "/from/file",
		HTTP: configs.HTTP{Listener: configs.Listener{Address: "127.0.0.1:9000", Enabled: true}, ReadHeaderTimeout: configs.Duration(10 * time.Second),
			ReadTimeout: configs.Duration(5 * time.Second), WriteTimeout: configs.Duration(time.Minute), IdleTimeout: configs.Duration(2 * time.Minute), MaxConnections: 300},
		GRPC: configs.GRPC{Address: "127.0.0.1:9001", Enabled: true, MaxMessageBytes: 32 * configs.MiB, MaxConcurrentStreams: 32,
			IdleTimeout: configs.Duration(time.Minute), MaxConnections: 50},
		Metrics:          configs.Listener{Address: ":8002", Enabled: false},
		ModelControlMode: "explicit",
		LoadMode:         "eager",
		StrictReadiness:  false,
		Instances:        1,
		SpecializeAfter:  3,
		Cache:            configs.Cache{Dir: "/var/cache/kiln", Policy: "readonly", Budget: 2 * configs.GiB},
		Limits: configs.Limits{MaxRequestBytes: configs.MiB, RequestTimeout: configs.Duration(45 * time.Second), MaxInflightBytes: 512 * configs.MiB, MemoryLimit: 2 * configs.GiB,
			RequestMemory: configs.GiB, TensorMemory: 256 * configs.MiB, CompileTimeout: configs.Duration(2 * time.Minute), Compiles: 3},
		TLS:           configs.TLS{CertFile: "/tls/crt", KeyFile: "/tls/key"},
		Auth:          configs.Auth{BearerTokenFile: "/secret/token"},
		Log:           configs.Log{Format: "console", Level: "warn"}, // the file wins over $KILN_LOG_FORMAT
		Tune:          configs.DefaultFile().Tune,
		Threads:       3,
		GPUs:          "none",
		ShutdownGrace: configs.Duration(10 * time.Second),
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("file only:\n got %+v\nwant %+v", cfg, want)
	}
	cfg, err = parseServe(t, nil, "--config", file,
		"--model-repository", "/from/flag", "--http-address", "127.0.0.1:7000", "--grpc-address", "", "--metrics-address", ":7002",
		"--grpc-max-message-bytes", "64MiB", "--load-mode", "lazy", "--strict-readiness", "--model-control-mode", "none", "--cache-dir", "/tmp/j", "--cache", "redo", "--cache-budget", "1GiB",
		"--max-request-bytes", "2MiB", "--request-timeout", "5s", "--tls-cert-file", "/c", "--tls-key-file", "/k",
		"--bearer-token-file", "/t", "--log-format", "json", "--log-level", "debug", "--threads", "1", "--grace", "1m",
		"--http-read-header-timeout", "3s", "--http-read-timeout", "2s", "--http-write-timeout", "0s", "--http-idle-timeout", "30s", "--http-max-connections", "100",
		"--grpc-max-concurrent-streams", "8", "--grpc-idle-timeout", "0s", "--grpc-max-connections", "20", "--max-inflight-bytes", "2GiB", "--memory-limit", "3GiB",
		"--max-request-memory", "2GiB", "--max-tensor-memory", "1GiB", "--compile-timeout", "0s", "--compiles", "1", "--gpus", "auto",
		"--tune", "background", "--tune-cpu", "0.5", "--tune-budget", "3m", "--tune-trials", "20", "--tune-idle-after", "500ms")
	if err != nil {
		t.Fatal(err)
	}
	want = configs.File{
		ModelRepository: "/from/flag",
		HTTP: configs.HTTP{Listener: configs.Listener{Address: "127.0.0.1:7000", Enabled: true}, ReadHeaderTimeout: configs.Duration(3 * time.Second),
			ReadTimeout: configs.Duration(2 * time.Second), IdleTimeout: configs.Duration(30 * time.Second), MaxConnections: 100},
		GRPC:             configs.GRPC{Address: "", Enabled: false, MaxMessageBytes: 64 * configs.MiB, MaxConcurrentStreams: 8, MaxConnections: 20},
		Metrics:          configs.Listener{Address: ":7002", Enabled: true},
		ModelControlMode: "none",
		LoadMode:         "lazy",
		StrictReadiness:  true,
		Instances:        1,
		SpecializeAfter:  3,
		Cache:            configs.Cache{Dir: "/tmp/j", Policy: "redo", Budget: configs.GiB},
		Limits: configs.Limits{MaxRequestBytes: 2 * configs.MiB, RequestTimeout: configs.Duration(5 * time.Second), MaxInflightBytes: 2 * configs.GiB, MemoryLimit: 3 * configs.GiB,
			RequestMemory: 2 * configs.GiB, TensorMemory: configs.GiB, Compiles: 1},
		TLS:  configs.TLS{CertFile: "/c", KeyFile: "/k"},
		Auth: configs.Auth{BearerTokenFile: "/t"},
		Log:  configs.Log{Format: "json", Level: "debug"},
		Tune: configs.Tune{Mode: "background", CPU: "0.5", Budget: configs.Duration(3 * time.Minute), Trials: 20,
			IdleAfter: configs.Duration(500 * time.Millisecond)},
		Threads:       1,
		GPUs:          "auto",
		ShutdownGrace: configs.Duration(time.Minute),
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("flags over the file:\n got %+v\nwant %+v", cfg, want)
	}
	// the merged cache keys open the journal through cacheFlags
	if cf := cacheFlagsOf(cfg.Cache); cf.dir != "/tmp/j" || cf.policy != "redo" || cf.budget != "1073741824" {
		t.Errorf("cacheFlagsOf: %+v", cf)
	}
}

// TestServeConfigModelKeys: instances, specialize_after and load_models come from the
// file, and --instances, --specialize-after and --load-model override them.
func TestServeConfigModelKeys(t *testing.T) {
	file := writeTemp(t, "kiln.yaml", `
model_repository: /m
model_control_mode: explicit
load_models: [mlp, resnet]
instances: 4
specialize_after: 0
`)
	cfg, err := parseServe(t, nil, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Instances != 4 || cfg.SpecializeAfter != 0 || !reflect.DeepEqual(cfg.LoadModels, []string{"mlp", "resnet"}) {
		t.Errorf("from the file: instances %d, specialize_after %d, load_models %q", cfg.Instances, cfg.SpecializeAfter, cfg.LoadModels)
	}
	cfg, err = parseServe(t, nil, "--config", file, "--instances", "2", "--specialize-after", "5", "--load-model", "*")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Instances != 2 || cfg.SpecializeAfter != 5 || !reflect.DeepEqual(cfg.LoadModels, []string{"*"}) {
		t.Errorf("flags over the file: instances %d, specialize_after %d, load_models %q", cfg.Instances, cfg.SpecializeAfter, cfg.LoadModels)
	}
	// without --config, the flags' defaults
	cfg, err = parseServe(t, nil, "--model-repository", "/m")
	if err != nil || cfg.Instances != 1 || cfg.SpecializeAfter != 3 || cfg.LoadModels != nil {
		t.Errorf("defaults: instances %d, specialize_after %d, load_models %q, %v", cfg.Instances, cfg.SpecializeAfter, cfg.LoadModels, err)
	}
}

// TestServeConfigErrors: problems are reported together, each naming its key (or its
// flag), as usage errors.
func TestServeConfigErrors(t *testing.T) {
	cases := []struct {
		name, file string
		args       []string
		want       []string
	}{
		{"models to load without explicit control", "model_repository: /m\n", []string{"--load-model", "mlp"},
			[]string{"--load-model needs model_control_mode: explicit"}},
		{"models to load in the file without explicit control", "model_repository: /m\nload_models: [mlp]\n", nil,
			[]string{"load_models: [\"mlp\"]: needs model_control_mode: explicit"}},
		{"negative instances", "model_repository: /m\n", []string{"--instances", "-1"}, []string{"instances: -1"}},
		{"gpus by number", "model_repository: /m\n", []string{"--gpus", "0"}, []string{"gpus: \"0\": must be auto or none"}},
		{"precision fp16", "model_repository: /m\n", []string{"--precision", "fp16"}, []string{`precision: "fp16": must be fp32 or tf32`}},
		{"bad control mode flag", "model_repository: /m\n", []string{"--model-control-mode", "poll"}, []string{"model_control_mode: \"poll\""}},
		{"no repository in the file", "threads: 2\n", nil, []string{"model_repository: must be set"}},
		{"unknown key", "model_repository: /m\nthread: 2\n", nil, []string{"unknown key thread"}},
		{"several at once", "model_repository: /m\nlog: {level: loud}\nload_mode: later\n", []string{"--tls-cert-file", "/c"},
			[]string{"log.level", "load_mode", "tls.key_file: must be set"}},
		{"flag makes it invalid", "model_repository: /m\n", []string{"--http-address", ":8001"}, []string{`grpc.address: ":8001" is also http.address`}},
		{"bad size flag", "model_repository: /m\n", []string{"--cache-budget", "lots"}, []string{"--cache-budget", "not a size"}},
		{"nothing served", "model_repository: /m\n", []string{"--http-address", "", "--grpc-address", ""}, []string{"http.enabled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--config", writeTemp(t, "kiln.yaml", c.file)}, c.args...)
			_, err := parseServe(t, nil, args...)
			var ue usageError
			if err == nil || !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestReadBearerToken(t *testing.T) {
	tok, err := readBearerToken(writeTemp(t, "token", "  s3cret-token\n\n"))
	if err != nil || tok != "s3cret-token" {
		t.Errorf("token with whitespace around: %q %v", tok, err)
	}
	for name, text := range map[string]string{"empty": "", "blank": " \n\t\n", "two words": "a b\n"} {
		if _, err := readBearerToken(writeTemp(t, "token", text)); err == nil || !strings.Contains(err.Error(), "auth.bearer_token_file: ") {
			t.Errorf("%s token file: %v, want an error naming auth.bearer_token_file", name, err)
		}
	}
	if _, err := readBearerToken(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "auth.bearer_token_file: ") {
		t.Errorf("absent token file: %v", err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost (valid an
// hour) and its key, and returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir, cn string) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestCertReload: a changed certificate is served from the next handshake after the
// check interval; a broken one keeps the previous certificate.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, _ := selfSigned(t, dir, "first")
	c, err := loadCertFiles(certPath, keyPath, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	c.interval = 0
	cn := func() string {
		t.Helper()
		cert, err := c.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(cert.Certificate[0])
		return x.Subject.CommonName
	}
	if got := cn(); got != "first" {
		t.Fatalf("served %q", got)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	selfSigned(t, dir, "second")
	if got := cn(); got != "second" {
		t.Fatalf("after rotation: served %q, want second", got)
	}
	os.WriteFile(certPath, []byte("not a certificate"), 0o644)
	if got := cn(); got != "second" {
		t.Fatalf("after a broken rotation: served %q, want the previous (second)", got)
	}
	if _, err := loadCertFiles(certPath, keyPath, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "tls.cert_file: ") {
		t.Errorf("broken certificate at start: %v, want an error naming tls.cert_file", err)
	}
}

// TestConnectionCapsFollowTheOpenFileLimit: caps left 0 leave room below the
// open-file limit for kiln's own files and the probe reserve; caps set are kept.
func TestConnectionCapsFollowTheOpenFileLimit(t *testing.T) {
	cfg := configs.DefaultFile()
	for _, c := range []struct{ nofile, http, grpc int }{{256, 56, 32}, {1024, 440, 224}, {1 << 20, 8192, 2048}, {0, 440, 224}, {100, 24, 16}} {
		got := connCapsFor(cfg, c.nofile)
		if got.http != c.http || got.grpc != c.grpc {
			t.Errorf("open-file limit %d: http %d, grpc %d; want %d, %d", c.nofile, got.http, got.grpc, c.http, c.grpc)
		}
		if c.nofile >= 256 && got.exceed {
			t.Errorf("open-file limit %d: the derived caps %+v exceed it", c.nofile, got)
		}
	}
	cfg.HTTP.MaxConnections, cfg.GRPC.MaxConnections = 1000, 500
	if got := connCapsFor(cfg, 256); got.http != 1000 || got.grpc != 500 || !got.exceed {
		t.Errorf("caps set above the limit: %+v, want them kept and flagged", got)
	}
}
