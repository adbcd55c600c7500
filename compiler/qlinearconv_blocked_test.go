package compiler_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	onnxpb "github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// qlinearConvChain is x [1, 16, 9, 11] → QuantizeLinear → QLinearConv 3×3 16→32 (pad
// 1) → QLinearConv 1×1 32→48 → QLinearConv 1×1 48→16 (stride 2) → QLinearConv 3×3
// depthwise (pad 1) → DequantizeLinear, uint8 data, int8 weights per output channel,
// int32 biases, constant scales: the integer convolutions hand each other their uint8
// results in channel blocks (48 channels: blocks of one vector, repacked from the tiles
// on AVX-512), the 1×1 ones reading them in place.
func qlinearConvChain() []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(41, 42))}
	i8, u8 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8
	f32, i32 := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT32
	q.node("QuantizeLinear", []string{"x", q.floats("xs", 0.02, 0.02), q.init("xz", u8, nil, []byte{128})}, []string{"q0"})
	in, scale, zero := "q0", "xs", "xz"
	layers := []struct {
		c, m, k, stride, group int64
		pads                   []int64
	}{{16, 32, 3, 1, 1, []int64{1, 1, 1, 1}}, {32, 48, 1, 1, 1, nil}, {48, 16, 1, 2, 1, nil}, {16, 16, 3, 1, 16, []int64{1, 1, 1, 1}}}
	for i, l := range layers {
		p := string(rune('a' + i))
		sw, bq := make([]byte, 4*l.m), make([]byte, 4*l.m)
		for k := range l.m {
			binary.LittleEndian.PutUint32(sw[4*k:], math.Float32bits(float32(0.001+0.002*q.r.Float64())))
			binary.LittleEndian.PutUint32(bq[4*k:], uint32(int32(q.r.IntN(4001)-2000)))
		}
		attrs := []*onnxpb.AttributeProto{attrInts("strides", []int64{l.stride, l.stride}), attrInt("group", l.group)}
		if l.pads != nil {
			attrs = append(attrs, attrInts("pads", l.pads))
		}
		out := p + "_q"
		q.node("QLinearConv", []string{in, scale, zero, q.bytes(p+"_w", i8, l.m, l.c/l.group, l.k, l.k), q.init(p+"_ws", f32, []int64{l.m}, sw),
			q.init(p+"_wz", i8, []int64{l.m}, make([]byte, l.m)), q.floats(p+"_ys", 0.04, 0.06), q.init(p+"_yz", u8, nil, []byte{byte(3 + 40*i)}),
			q.init(p+"_b", i32, []int64{l.m}, bq)}, []string{out}, attrs...)
		in, scale, zero = out, p+"_ys", p+"_yz"
	}
	q.node("DequantizeLinear", []string{in, scale, zero}, []string{"out"})
	return q.model("1", []int64{16, 9, 11}, "qlinearconv_chain")
}

// TestQLinearConvChainStaysBlocked: at O3, on each ISA level of the host, every
// QLinearConv of the chain is an integer kernel that writes channel blocks for the next
// (the depthwise one's result, the model's, is plain), the 1×1 ones read their data in
// place (no padded copy) and the chain's results equal the reference evaluator's.
func TestQLinearConvChainStaysBlocked(t *testing.T) {
	m, err := onnx.LoadBytes(qlinearConvChain(), "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(tensor.Float32, tensor.Shape{1, 16, 9, 11})
	r := rand.New(rand.NewPCG(7, 8))
	for i := range x.Data.([]float32) {
		x.Data.([]float32)[i] = float32(2.5 * (2*r.Float64() - 1))
	}
	want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	levels := []target.Level{""} // the host as the process runs (under a cap, if set)
	if target.Host().Has("avx512f") {
		levels = append(levels, target.LevelAVX2) // the int16 pairs' form, below it
	}
	for _, level := range levels {
		t.Run("isa="+string(level), func(t *testing.T) {
			if level != "" {
				t.Setenv(target.ISAEnv, string(level))
			}
			dev := openDevice(t) // compiling for the level set
			vnni := target.Host().Has("avx512vnni")
			var kernels []string
			inPlace, blockedOut, depthwise := 0, 0, 0
			var transforms []string
			lowered := func(workload string, f *loopir.PrimFunc) {
				if strings.Contains(workload, "layouttransform") {
					transforms = append(transforms, workload)
				}
				if !strings.Contains(workload, "qlinearconv") {
					return
				}
				kernels = append(kernels, workload)
				text := loopir.Print(f)
				if !strings.Contains(text, "alloc pad") {
					inPlace++
				}
				if strings.Contains(text, "dwconv") {
					depthwise++ // the integer depthwise strategy's stage
				}
				// [1, M/b, OH, OW, b], not NCHW or its split view [1, M/b, b, OH, OW]
				if out := f.Params[len(f.Params)-1].Shape; len(out) == 5 && strings.Contains(" 8 16 32 64 ", " "+loopir.ExprString(out[4])+" ") {
					blockedOut++
				}
			}
			res, err := compiler.Build(m, target.Host(), compiler.Options{CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: engine.O3}, Lowered: lowered})
			if err != nil {
				t.Fatal(err)
			}
			if len(kernels) != 4 {
				t.Fatalf("QLinearConv kernels %v, want 4", kernels)
			}
			// the 8-bit micro-kernel reads blocked data in place; the int16 one copies it
			if want := map[bool]int{true: 2, false: 0}[vnni]; inPlace != want {
				t.Errorf("QLinearConv kernels reading their data in place: %d, want %d", inPlace, want)
			}
			if depthwise != 1 {
				t.Errorf("kernels on the integer depthwise stages: %d, want 1", depthwise)
			}
			// the last one's result is dequantized plain (the model's output)
			if blockedOut != 3 {
				t.Errorf("QLinearConv kernels writing their result in channel blocks: %d, want 3", blockedOut)
			}
			if len(transforms) != 0 {
				t.Errorf("layout transforms between the integer convolutions: %v", transforms)
			}
			machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
			if err != nil {
				t.Fatal(err)
			}
			defer machine.Close()
			got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			if msg := differ(got[0], want[0].(*tensor.Tensor)); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}
