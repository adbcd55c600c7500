package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/vm"
)

// material is the journal key material of m's executable for the input shapes: what
// decides the executable's content and nothing else, so that any kiln of the same
// build, for the same target and device, finds the entry; a serve-only build (no C
// compiler) computes the same key as the kiln that prebuilt it. The C toolchain that
// built the kernels is not part of it (an executable runs the same whichever compiler
// built it); it keys the single kernels' object code (the compiler's kernel entries).
// The tuning component is the digest of the tuning records of the model's kernels that
// the compile applies ("none" without records; workloads.go).
func (e *Engine) material(m *Model, shapes map[string][]int64, recs []compilecache.TuningRecord) compilecache.Material {
	return compilecache.Material{Kind: compilecache.KindExecutable, Parts: []compilecache.Component{
		{Name: "model", Value: m.Digest},
		{Name: "inputs", Value: canonicalShapes(shapes)},
		{Name: "options", Value: e.cfg.Recipe.String()},
		{Name: "compiler", Value: Identity()},
		{Name: "target", Value: e.TargetFingerprint()},
		{Name: "tuning", Value: compilecache.TuningDigest(recs)},
		{Name: "schema", Value: Schema()},
	}}
}

// Material is the key material of m's executable for the shapes (for `kiln cache` and
// tests).
func (e *Engine) Material(m *Model, shapes map[string][]int64) compilecache.Material {
	if shapes == nil {
		shapes = map[string][]int64{}
	}
	recs, _ := e.tuning()
	if len(recs) > 0 && e.cfg.Journal != nil {
		if ws, ok := e.storedWorkloads(m, shapes); ok {
			recs = ofWorkloads(recs, ws)
		}
	}
	return e.material(m, shapes, recs)
}

// TargetFingerprint is the target's fingerprint and the device's (and the host
// CPU's, for a GPU target: its kernels are in the executable too).
func (e *Engine) TargetFingerprint() string {
	s := e.cfg.Target.Fingerprint() + " | device " + e.cfg.Device.Info().Fingerprint
	if e.cfg.Host != nil {
		s += " | host " + e.cfg.Host.Info().Fingerprint
	}
	return s
}

// Schema names the journal's and the executable format's versions.
func Schema() string {
	return fmt.Sprintf("journal %d, executable %d", compilecache.SchemaVersion, vm.FormatVersion)
}

// canonicalShapes prints input shapes sorted by name: "ids[1 128];mask[1 128]".
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
