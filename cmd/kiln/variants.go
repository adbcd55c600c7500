package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx"
)

// variant is one compiled executable of a model found in the journal: the generic one
// (every shape) or one specialized for a shape signature.
type variant struct {
	Shapes  string    `json:"shapes"` // "" for the generic executable
	Options string    `json:"options"`
	Current bool      `json:"current_compiler"` // built by this kiln (a hit), not an older one
	Size    int64     `json:"bytes"`
	LastUse time.Time `json:"last_use"`
}

// journalVariants lists the executables of the model at path that the journal holds
// (nil when there is no journal yet: inspecting never creates one).
func journalVariants(path string, cf cacheFlags) ([]variant, string, error) {
	dir := cf.dir
	if dir == "" {
		dir = defaultCacheDir()
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, dir, nil
	}
	digest, err := onnx.Digest(path)
	if err != nil {
		return nil, dir, err
	}
	cf.policy = "readonly"
	j, err := cf.open(newLogger(false))
	if err != nil {
		return nil, dir, err
	}
	defer j.Close()
	es, err := j.Entries()
	if err != nil {
		return nil, dir, err
	}
	identity := engine.Identity()
	var out []variant
	for _, e := range es {
		if e.Material.Kind != compilecache.KindExecutable || part(e.Material, "model") != digest {
			continue
		}
		out = append(out, variant{Shapes: part(e.Material, "inputs"), Options: part(e.Material, "options"),
			Current: part(e.Material, "compiler") == identity, Size: e.Size, LastUse: e.LastUse})
	}
	return out, dir, nil
}

func part(m compilecache.Material, name string) string {
	for _, c := range m.Parts {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// printVariants writes the journal's executables of a model, generic first.
func printVariants(w io.Writer, vs []variant, dir string) {
	if len(vs) == 0 {
		fmt.Fprintf(w, "journal (%s): no compiled executable of this model\n", dir)
		return
	}
	fmt.Fprintf(w, "journal (%s): %d compiled executables of this model\n", dir, len(vs))
	for _, generic := range []bool{true, false} {
		for _, v := range vs {
			if (v.Shapes == "") != generic {
				continue
			}
			what := "generic (every shape)"
			if !generic {
				what = "specialized for " + v.Shapes
			}
			stale := ""
			if !v.Current {
				stale = ", built by another kiln version"
			}
			fmt.Fprintf(w, "  %s: %s, last used %s%s\n", what, byteSize(v.Size), v.LastUse.Format(time.DateTime), stale)
		}
	}
}
