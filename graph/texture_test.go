package graph

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestTexturePackingsPrintParseAndMeasure: each packing has its own mark in the text
// form ("@tex" stays the activation packing) and its own image: the same value is a
// tall image as NCHW4c and a wide one as NHWC4c.
func TestTexturePackingsPrintParseAndMeasure(t *testing.T) {
	cases := []struct {
		text    string
		packing Packing
		w, h    int64
	}{
		{"f32[2,8,5,7]@c4@tex", PackNCHW4c, 7, 2 * 2 * 5},
		{"f32[2,8,5,7]@c4@texnhwc", PackNHWC4c, 7 * 2, 2 * 5},
		{"f32[16,3,3,3]@c4@texw", PackOIHW4o, 3 * 3 * 3, 4},
	}
	for _, c := range cases {
		ty, err := ParseType(c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.text, err)
		}
		if ty.Scope != ScopeTexture || ty.Packing != c.packing {
			t.Errorf("%s: parsed as %v %v, want texture %v", c.text, ty.Scope, ty.Packing, c.packing)
		}
		if got := ty.String(); got != c.text {
			t.Errorf("%s: prints as %s", c.text, got)
		}
		if err := checkType(ty); err != nil {
			t.Errorf("%s: %v", c.text, err)
		}
		if w, h, ok := ImageSize(ty); !ok || w != c.w || h != c.h {
			t.Errorf("%s: image %dx%d (ok %v), want %dx%d", c.text, w, h, ok, c.w, c.h)
		}
	}
}

// TestVerifyRefusesTexturesThatBreakTheirPacking: a texture is a 4-D tensor in blocks
// of 4 along its packing's blocked axis (channels, or output channels for a weight),
// and a global value has no packing.
func TestVerifyRefusesTexturesThatBreakTheirPacking(t *testing.T) {
	bad := map[string]Type{
		"blocks of 16":                  {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(1, 16, 4, 4), Block: 16, Scope: ScopeTexture},
		"no block":                      {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(1, 16, 4, 4), Scope: ScopeTexture},
		"rank 3":                        {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(16, 4, 4), Block: 4, Scope: ScopeTexture},
		"weight of 6 output channels":   {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(6, 8, 3, 3), Block: 4, Scope: ScopeTexture, Packing: PackOIHW4o},
		"nhwc of 6 channels":            {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(1, 6, 3, 3), Block: 4, Scope: ScopeTexture, Packing: PackNHWC4c},
		"symbolic channels":             {Kind: KindTensor, DType: tensor.Float32, Shape: []Dim{Const(1), Sym("c"), Const(3), Const(3)}, Block: 4, Scope: ScopeTexture},
		"a global value with a packing": {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(8, 8, 3, 3), Block: 4, Packing: PackOIHW4o},
		"an unknown packing":            {Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(8, 8, 3, 3), Block: 4, Scope: ScopeTexture, Packing: numPackings},
	}
	for name, ty := range bad {
		if err := checkType(ty); err == nil {
			t.Errorf("%s: %v passes the type check", name, ty)
		}
		if _, _, ok := ImageSize(ty); ok && ty.Scope == ScopeTexture {
			t.Errorf("%s: %v has an image size", name, ty)
		}
	}
	// a weight blocks its output channels, not its input channels
	w := Type{Kind: KindTensor, DType: tensor.Float32, Shape: StaticShape(8, 3, 3, 3), Block: 4, Scope: ScopeTexture, Packing: PackOIHW4o}
	if err := checkType(w); err != nil {
		t.Errorf("%v: %v", w, err)
	}
	if _, err := ParseType("f32[1,8,4,4]@c4@texq"); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("an unknown texture mark parses: %v", err)
	}
}
