package cpu_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	kcpu "github.com/kilnrt/kiln/kernels/cpu"
)

// TestIntegerQDQ: the CPU runs a QDQ convolution on integers only where the blocked
// integer convolution takes it and beats the float one (ungrouped, over 16 channels or
// more or a window wider than 1×1, static shapes, explicit padding).
func TestIntegerQDQ(t *testing.T) {
	cases := []struct {
		name, x, w, attrs, y string
		want                 bool
	}{
		{"3×3 over 16 channels", "f32[1,16,8,8]", "f32[32,16,3,3]", "kernel_shape=[3,3], pads=[1,1,1,1]", "f32[1,32,8,8]", true},
		{"1×1", "f32[1,16,8,8]", "f32[32,16,1,1]", "kernel_shape=[1,1]", "f32[1,32,8,8]", true},
		{"a stem over 3 channels", "f32[1,3,8,8]", "f32[32,3,3,3]", "kernel_shape=[3,3], pads=[1,1,1,1]", "f32[1,32,8,8]", true},
		{"1×1 over 8 channels", "f32[1,8,8,8]", "f32[32,8,1,1]", "kernel_shape=[1,1]", "f32[1,32,8,8]", false},
		{"grouped", "f32[1,16,8,8]", "f32[32,8,3,3]", "kernel_shape=[3,3], pads=[1,1,1,1], group=2", "f32[1,32,8,8]", false},
		{"depthwise", "f32[1,16,8,8]", "f32[16,1,3,3]", "kernel_shape=[3,3], pads=[1,1,1,1], group=16", "f32[1,16,8,8]", false},
		{"a symbolic batch", "f32[n,16,8,8]", "f32[32,16,3,3]", "kernel_shape=[3,3], pads=[1,1,1,1]", "f32[n,32,8,8]", false},
		{"automatic padding", "f32[1,16,8,8]", "f32[32,16,3,3]", "kernel_shape=[3,3], auto_pad=\"SAME_UPPER\"", "f32[1,32,8,8]", false},
	}
	for _, c := range cases {
		m, err := graph.Parse(`module opsets(""=13)
func @main(%x: ` + c.x + `, %w: ` + c.w + `) {
  %y = Conv(%x, %w) {` + c.attrs + `} : ` + c.y + `
  return %y
}`)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := kcpu.IntegerQDQ(m.Main.Nodes[0]); got != c.want {
			t.Errorf("%s: IntegerQDQ = %v, want %v", c.name, got, c.want)
		}
	}
}
