package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/compilecache"
)

// The key space: seeds × variants. A material names its seed and variant (and, for some,
// a large padding component so its put record spans several pages); the content is a
// function of the seed alone.
const (
	numSeeds    = 160
	numVariants = 4
)

// material is the key material of (seed, variant).
func material(seed, variant int) compilecache.Material {
	kind := compilecache.KindExecutable
	if variant == 2 {
		kind = compilecache.KindKernel
	}
	m := compilecache.Material{Kind: kind, Parts: []compilecache.Component{
		{Name: "seed", Value: strconv.Itoa(seed)},
		{Name: "variant", Value: strconv.Itoa(variant)},
	}}
	if n := padLen(seed, variant); n > 0 {
		m.Parts = append(m.Parts, compilecache.Component{Name: "pad", Value: strings.Repeat(string(rune('a'+variant)), n)})
	}
	return m
}

// heavySeeds have, with variant 0, a put record of 256 KiB to 0.9 MiB: appended in one
// write that spans many pages, which a SIGKILL can cut short (a torn tail).
var heavySeeds = []int{0, 1, 2, 8, 9, 10, 16, 17, 18}

// padLen is the size of (seed, variant)'s padding component (0: none).
func padLen(seed, variant int) int {
	switch {
	case variant == 0 && seed%8 <= 2 && seed < 24:
		return 256<<10 + (seed*7919)%(640<<10)
	case (seed*numVariants+variant)%17 == 0:
		return 24<<10 + (seed*7919+variant*104729)%(160<<10)
	}
	return 0
}

func label(seed, variant int) string { return fmt.Sprintf("s%d-v%d", seed, variant) }

// parseMaterial recovers (seed, variant) from a stored material and checks that the
// material is exactly the one material(seed, variant) builds.
func parseMaterial(m compilecache.Material) (seed, variant int, err error) {
	s, ok1 := m.Get("seed")
	v, ok2 := m.Get("variant")
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("material without seed/variant: %s", m.String())
	}
	if seed, err = strconv.Atoi(s); err != nil {
		return 0, 0, err
	}
	if variant, err = strconv.Atoi(v); err != nil {
		return 0, 0, err
	}
	if seed < 0 || seed >= numSeeds || variant < 0 || variant >= numVariants {
		return 0, 0, fmt.Errorf("seed %d variant %d out of range", seed, variant)
	}
	if material(seed, variant).Key() != m.Key() {
		return 0, 0, fmt.Errorf("stored material of %s differs from the one written", label(seed, variant))
	}
	return seed, variant, nil
}

// shape says how the content of seed is made: n bytes, of which the first head are
// compressible text and the rest random (incompressible) bytes; rawFrom is what Put is
// given.
func shape(seed int) (n, head, rawFrom int) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6b696c6e))
	switch seed % 8 {
	case 0, 1, 2: // tiny to small, compressible
		n = 1 + r.IntN(4096)
		return n, n, 0
	case 3, 4: // medium, compressible
		n = 16<<10 + r.IntN(512<<10)
		return n, n, 0
	case 5: // big and compressible, offered a raw tail it does not get
		n = 1<<20 + r.IntN(2<<20)
		return n, n, 256 << 10
	default: // a compressible head and a raw, random tail of 1 to 3 MiB
		head = 1 + r.IntN(128<<10)
		n = head + 1<<20 + r.IntN(2<<20)
		return n, head, head
	}
}

// content is what every writer stores for seed.
func content(seed int) []byte {
	n, head, _ := shape(seed)
	out := make([]byte, 0, n)
	line := 0
	for len(out) < head {
		out = append(out, "seed "...)
		out = strconv.AppendInt(out, int64(seed), 10)
		out = append(out, " line "...)
		out = strconv.AppendInt(out, int64(line), 10)
		out = append(out, ": kiln executable text\n"...)
		line++
	}
	out = out[:head]
	if n > head {
		tail := make([]byte, n-head)
		r := rand.NewChaCha8(seedKey(seed))
		r.Read(tail)
		out = append(out, tail...)
	}
	return out
}

func seedKey(seed int) (k [32]byte) {
	copy(k[:], fmt.Sprintf("journalcrash seed %d", seed))
	return k
}

// rawFrom is what a writer passes to Put for (seed, variant): variant 3 asks for no raw
// tail, so a seed with a raw tail has two blob layouts of the same content (digest).
func rawFrom(seed, variant int) int {
	if variant == 3 {
		return 0
	}
	_, _, rf := shape(seed)
	return rf
}

// digests caches the SHA-256 and length of each seed's content.
var digests sync.Map // int -> contentID

type contentID struct {
	d compilecache.Digest
	n int
}

func contentDigest(seed int) contentID {
	if v, ok := digests.Load(seed); ok {
		return v.(contentID)
	}
	c := content(seed)
	id := contentID{compilecache.DigestOf(c), len(c)}
	digests.Store(seed, id)
	return id
}

// checkContent compares content read for (seed, variant) with what was written.
func checkContent(seed, variant int, got []byte) error {
	if id := contentDigest(seed); len(got) == id.n && compilecache.DigestOf(got) == id.d {
		return nil
	}
	want := content(seed)
	if bytes.Equal(got, want) {
		return fmt.Errorf("%s: content digest cache is wrong", label(seed, variant))
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("%s: read %d bytes, want %d; first difference at byte %d", label(seed, variant), len(got), len(want), i)
}
