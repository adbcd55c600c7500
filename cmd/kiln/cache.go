package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/configs"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
)

// cacheFlags select the binary journal: where it is, how it is used, how large it may
// grow.
type cacheFlags struct {
	dir, policy, budget string
}

func (c *cacheFlags) register(f *pflag.FlagSet, defaultPolicy string) {
	f.StringVar(&c.dir, "cache-dir", "", "the journal's directory (default $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)")
	f.StringVar(&c.policy, "cache", defaultPolicy, "journal policy: on (read and write), readonly, redo (rebuild and overwrite) or off")
	f.StringVar(&c.budget, "cache-budget", "", "evict least recently used entries beyond this size, e.g. 2GiB (default: none)")
}

// defaultCacheDir follows docs/ARCHITECTURE.md, "The binary journal"
// ($XDG_CACHE_HOME/kiln), with $KILN_CACHE_DIR first so containers and tests can point
// elsewhere.
func defaultCacheDir() string {
	if d := os.Getenv("KILN_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kiln")
	}
	// one per user: the journal refuses a directory in a shared one that is not this
	// user's (or root's)
	return filepath.Join(os.TempDir(), fmt.Sprintf("kiln-cache-%d", os.Geteuid()))
}

func (c *cacheFlags) open(log *zap.Logger) (*compilecache.Journal, error) {
	p, err := compilecache.ParsePolicy(c.policy)
	if err != nil {
		return nil, usageError{err}
	}
	budget, err := parseBytes(c.budget)
	if err != nil {
		return nil, usageError{fmt.Errorf("--cache-budget: %w", err)}
	}
	dir := c.dir
	if dir == "" {
		dir = defaultCacheDir()
	}
	return compilecache.Open(compilecache.Options{Dir: dir, Policy: p, Budget: budget, Log: log})
}

// buildInCache makes the C compiler write its work files in the journal's tmp/ (a work
// directory claimed by this process, removed by the next process that opens the journal
// if this one dies), when the journal is writable; otherwise it keeps kiln-<uid> in
// $TMPDIR.
func buildInCache(dev *devcpu.Device, j *compilecache.Journal) {
	if cc := dev.Compiler(); cc != nil && j.TempDir() != "" {
		cc.SetWorkBase(j.TempDir())
	}
}

// parseBytes reads sizes like 512MiB, 2GiB, 1GB or a plain byte count ("" is 0), as the
// server config file does (configs.ParseSize).
func parseBytes(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := configs.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 2GiB)", s)
	}
	return int64(n), nil
}

// newLogger logs to stderr, human-readable; quiet keeps warnings only.
func newLogger(quiet bool) *zap.Logger {
	cfg := zap.NewDevelopmentEncoderConfig()
	cfg.TimeKey = ""
	level := zapcore.InfoLevel
	if quiet {
		level = zapcore.WarnLevel
	}
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(cfg), zapcore.Lock(os.Stderr), level))
}

// modelName labels a model file in the journal and logs: its file name, or for
// <repo>/<model>/<version>/model.onnx "model/version".
func modelName(path string) string {
	name := filepath.Base(path)
	if name == "model.onnx" {
		name = filepath.Base(filepath.Dir(path))
		if _, err := strconv.Atoi(name); err == nil {
			name = filepath.Base(filepath.Dir(filepath.Dir(path))) + "/" + name
		}
	}
	return name
}
