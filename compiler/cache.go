package compiler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// Source is a model to compile through the journal: its content digest keys the entry,
// and it is read only on a miss.
type Source struct {
	Name   string // label for the journal and logs (e.g. the model's name)
	Digest string // content digest of the model and its external data (onnx.Digest)
	Load   func() (*graph.Module, error)
}

// Cached is an executable obtained through the journal.
type Cached struct {
	Exe      *vm.Executable
	Result   *Result // the compile's statistics; nil when the executable came from the journal
	Outcome  compilecache.Outcome
	Key      compilecache.Key
	Miss     compilecache.MissCause // why the journal had no usable entry
	Material compilecache.Material
	Took     time.Duration
}

// tuningDigest names the tuning records a compile used: kiln has no tuner, and the
// component is in every key so records will invalidate entries.
const tuningDigest = "none"

// ExecutableMaterial is the key material of src compiled for t with opts; opts.Inputs
// must hold the concrete input shapes the executable will serve.
func ExecutableMaterial(src Source, t target.Target, opts Options) compilecache.Material {
	return compilecache.Material{Kind: compilecache.KindExecutable, Parts: []compilecache.Component{
		{Name: "model", Value: src.Digest},
		{Name: "inputs", Value: canonicalShapes(opts.Inputs)},
		{Name: "options", Value: canonicalOptions(opts)},
		{Name: "compiler", Value: Identity()},
		{Name: "target", Value: targetFingerprint(t, opts)},
		{Name: "toolchain", Value: toolchain(opts)},
		{Name: "tuning", Value: tuningDigest},
		{Name: "schema", Value: schema()},
	}}
}

// kernelMaterial keys one kernel's object code: its source (which the lowered function
// and the C emitter fully determine), the target and the toolchain.
func kernelMaterial(code string, t target.Target, opts Options) compilecache.Material {
	return compilecache.Material{Kind: compilecache.KindKernel, Parts: []compilecache.Component{
		{Name: "source", Value: digestString(code)},
		{Name: "target", Value: targetFingerprint(t, opts)},
		{Name: "toolchain", Value: toolchain(opts)},
		{Name: "schema", Value: schema()},
	}}
}

func schema() string {
	return fmt.Sprintf("journal %d, executable %d", compilecache.SchemaVersion, vm.FormatVersion)
}

func targetFingerprint(t target.Target, opts Options) string {
	s := t.Fingerprint()
	if opts.CPU != nil {
		s += " | device " + opts.CPU.Info().Fingerprint
	}
	return s
}

func toolchain(opts Options) string {
	if opts.CPU == nil || opts.CPU.Compiler() == nil {
		return "none"
	}
	return opts.CPU.Compiler().Identity()
}

// canonicalShapes prints input shapes sorted by name: "ids[1,128];mask[1,128]".
func canonicalShapes(shapes map[string][]int64) string {
	names := make([]string, 0, len(shapes))
	for k := range shapes {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s%v", k, shapes[k]))
	}
	return strings.Join(parts, ";")
}

// canonicalOptions prints what in opts changes the generated code: the pass pipeline
// (after NoFusion), the layout choice and bounds checks (named only when on, so the
// keys of default builds are unchanged). Dims, Progress, Jobs, Check and dumps do not.
func canonicalOptions(opts Options) string {
	p := opts.Passes
	if p == nil {
		p = passes.Compile()
	}
	if opts.NoFusion {
		p = p.Without("fuse-ops")
	}
	var names []string
	for _, x := range p {
		names = append(names, x.Name)
	}
	layout := "blocked"
	if opts.PlainLayout {
		layout = "plain"
	}
	// Dims are not part of it: they follow from the model and the input shapes
	s := fmt.Sprintf("passes=%s layout=%s", strings.Join(names, ","), layout)
	if opts.BoundsCheck {
		s += " bounds-check"
	}
	return s
}

// BuildCached returns src's executable for t from the journal j, or compiles it (once
// per key across the processes sharing j) and publishes it. opts.Inputs are the input
// shapes to serve (empty, not nil: none, so the symbolic dims stay free and the
// executable serves every shape); Dims are derived from them on a miss when not given. The kernels of
// a compile are looked up in the journal one by one too (opts.Cache is set to j).
func BuildCached(j *compilecache.Journal, src Source, t target.Target, opts Options) (*Cached, error) {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Inputs == nil {
		return nil, fmt.Errorf("%w: %s: BuildCached needs the input shapes (Options.Inputs) for the key", ErrCompile, src.Name)
	}
	// the timeout covers the wait for another process's compile and the load too
	ctx, cancel := withTimeout(opts.Context, opts.Timeout)
	defer cancel()
	opts.Context, opts.Timeout = ctx, 0
	opts.Cache = j
	start := time.Now()
	mat := ExecutableMaterial(src, t, opts)
	out := &Cached{Material: mat}
	build := func(ctx context.Context) ([]byte, int, error) {
		res, err := buildSource(src, t, opts)
		if err != nil {
			return nil, 0, err
		}
		out.Result = res
		blob, err := res.Exe.MarshalBinary()
		if err != nil {
			return nil, 0, err
		}
		return blob, dataOffset(blob), nil
	}
	var dropped compilecache.MissCause
	for attempt := 0; ; attempt++ {
		r, err := j.Do(opts.Context, mat, src.Name, build)
		if err != nil {
			return nil, err
		}
		out.Outcome, out.Key, out.Miss = r.Outcome, r.Key, r.Miss
		if dropped.Kind != compilecache.MissNone {
			out.Miss = dropped
		}
		if out.Result != nil {
			out.Exe = out.Result.Exe
			break
		}
		if out.Exe, err = decodeBlob(r.Blob); err == nil {
			break
		}
		// the bytes passed the journal's checksums but are not an executable this kiln
		// reads: drop the entry and build again (once)
		cause := "the entry does not decode: " + err.Error()
		if attempt > 0 {
			return nil, fmt.Errorf("%w: %s: %s", ErrCompile, src.Name, cause)
		}
		j.Invalidate(mat, cause)
		dropped = compilecache.MissCause{Kind: compilecache.MissInvalidated, Detail: cause}
	}
	out.Took = time.Since(start)
	return out, nil
}

func buildSource(src Source, t target.Target, opts Options) (*Result, error) {
	if opts.Name == "" {
		opts.Name = src.Name
	}
	m, err := src.Load()
	if err != nil {
		return nil, err
	}
	if opts.Dims == nil {
		if opts.Dims, err = DimsFromShapes(m, opts.Inputs); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCompile, src.Name, err)
		}
	}
	return Build(m, t, opts)
}

// dataOffset is where the executable's constant data starts: the journal may keep the
// bytes from there on raw, and Decode then uses them in place.
func dataOffset(blob []byte) int {
	off, err := vm.DataOffset(blob)
	if err != nil {
		panic("BUG: an executable just encoded has no data offset: " + err.Error())
	}
	return int(off)
}

// decodeBlob decodes an executable from a journal blob; its constants alias the mapped
// tail, and the executable keeps the blob (and so the mapping) alive.
func decodeBlob(b *compilecache.Blob) (*vm.Executable, error) {
	if b.Tail() != nil {
		return vm.Decode(b.Head(), b.Tail(), b)
	}
	all := b.Head()
	off, err := vm.DataOffset(all)
	if err != nil {
		return nil, err
	}
	if off > int64(len(all)) {
		return nil, fmt.Errorf("%w: data offset %d beyond %d bytes", vm.ErrFormat, off, len(all))
	}
	return vm.Decode(all[:off], all[off:], b)
}

func digestString(s string) string {
	return compilecache.DigestOf([]byte(s)).String()
}
