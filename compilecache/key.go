package compilecache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Kind is the level an entry lives at.
type Kind string

const (
	// KindExecutable is a whole compiled executable (model × target × options).
	KindExecutable Kind = "exe"
	// KindKernel is one kernel's object code (lowered function × target × toolchain).
	KindKernel Kind = "kernel"
)

// Component is one named part of a key's material: a digest or a canonical string.
type Component struct {
	Name, Value string
}

// Material is everything a key is derived from. It is stored with the entry, so a miss
// can say which component differed from the closest entry.
type Material struct {
	Kind  Kind
	Parts []Component // in a fixed order chosen by the caller; names are unique
}

// Key identifies an entry: SHA-256 over the kind and the components (names included),
// each length-prefixed so no two materials encode alike.
type Key [32]byte

func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Short is the first 12 hex digits, for logs.
func (k Key) Short() string { return k.String()[:12] }

// ParseKey reads a key's 64 hex digits.
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("compilecache: %q is not a key (64 hex digits)", s)
	}
	copy(k[:], b)
	return k, nil
}

// Key derives the key.
func (m Material) Key() Key {
	h := sha256.New()
	put := func(s string) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	put(string(m.Kind))
	for _, c := range m.Parts {
		put(c.Name)
		put(c.Value)
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Get returns the value of the named component.
func (m Material) Get(name string) (string, bool) {
	for _, c := range m.Parts {
		if c.Name == name {
			return c.Value, true
		}
	}
	return "", false
}

// Diff names the components that differ between m and o (present in one only, or with
// different values), sorted.
func (m Material) Diff(o Material) []string {
	var out []string
	if m.Kind != o.Kind {
		out = append(out, "kind")
	}
	seen := map[string]bool{}
	for _, c := range m.Parts {
		seen[c.Name] = true
		if v, ok := o.Get(c.Name); !ok || v != c.Value {
			out = append(out, c.Name)
		}
	}
	for _, c := range o.Parts {
		if !seen[c.Name] {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

// String prints the material one component per line, values shortened.
func (m Material) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind=%s", m.Kind)
	for _, c := range m.Parts {
		v := c.Value
		if len(v) > 80 {
			v = v[:77] + "..."
		}
		fmt.Fprintf(&b, "\n%s=%s", c.Name, v)
	}
	return b.String()
}
