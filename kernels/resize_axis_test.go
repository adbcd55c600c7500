package kernels

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/graph"
)

// TestResizeFixedPointCoordinatesDecideAsFloat64: over upscales and downscales by sizes
// (scales out/in that float64 does not hold exactly, so coordinates land a rounding away
// from integers and ties) in every mode, the kernel's fixed-point coordinate (the fit
// and its pinned outputs) decides every output as the float64 coordinate ONNX defines:
// the same nearest index, the same side of the crop, the same interpolation position.
// Some axes need pinned outputs; one that would need too many is refused.
func TestResizeFixedPointCoordinatesDecideAsFloat64(t *testing.T) {
	pinned, refused := 0, 0
	for _, coord := range []string{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"} {
		for _, mode := range []string{"nearest/round_prefer_floor", "nearest/round_prefer_ceil", "nearest/floor", "nearest/ceil", "linear", "cubic"} {
			a := &graph.ResizeAttrs{Mode: mode, CoordinateTransformationMode: coord}
			if len(mode) > 8 && mode[:8] == "nearest/" {
				a.Mode, a.NearestMode = "nearest", mode[8:]
			}
			for in := int64(1); in <= 40; in += 3 {
				for out := int64(1); out <= 90; out += 4 {
					scale := float64(out) / float64(in)
					ax, err := planResizeAxis(a, in, out, scale, 0.15, 1.1)
					if errors.Is(err, ErrNoKernel) {
						refused++
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					pinned += len(ax.fixes)
					for o := range out {
						x, _ := resizeCoord(coord, o, in, out, scale, 0.15, 1.1)
						fixed := ax.p*o + ax.q
						for _, f := range ax.fixes {
							if f.o == o {
								fixed = f.x
							}
						}
						if got, want := decideFixed(a, ax.antialias, fixed, ax.k, in), decideFloat(a, ax.antialias, x, in); !got.matches(want) {
							t.Fatalf("%s %s %d→%d output %d (x = %v): fixed point decides %+v, float64 %+v", coord, mode, in, out, o, x, got, want)
						}
					}
				}
			}
		}
	}
	if pinned == 0 {
		t.Error("no output needed a pinned coordinate: the sweep does not reach ties")
	}
	t.Logf("%d pinned outputs, %d axes refused", pinned, refused)
}
