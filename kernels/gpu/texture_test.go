package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// imagerOrSkip opens the OpenCL device, skipping when it has no images.
func imagerOrSkip(t *testing.T) *opencl.Device {
	t.Helper()
	d := openclOrSkip(t)
	if w, h := d.ImageLimits(); w == 0 || h == 0 {
		t.Skipf("%s has no images; skipping", d.Info().Name)
	}
	return d
}

// randomTensor is a float32 tensor of shape with values in [-2, 2).
func randomTensor(shape tensor.Shape, seed uint64) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 5))
	v := make([]float64, shape.NumElements())
	for i := range v {
		v[i] = r.Float64()*4 - 2
	}
	return tensor.FromFloat64s(tensor.Float32, shape, v)
}

// blocked4 is x ([A, B, C, D]) with axis ax split in blocks of 4 lanes, in the order of
// its texture: [A, B/4, C, D, 4] for axis 1 (NCHW4c), [A/4, B, C, D, 4] for axis 0
// (OIHW4o). Read as texels in row-major order, these are the image's bytes.
func blocked4(x *tensor.Tensor, ax int) []float64 {
	v := x.Float64s()
	s := x.Shape
	out := make([]float64, len(v))
	for a := range s[0] {
		for b := range s[1] {
			for c := range s[2] {
				for d := range s[3] {
					src := ((a*s[1]+b)*s[2]+c)*s[3] + d
					var dst int
					if ax == 1 {
						dst = ((((a*(s[1]/4)+b/4)*s[2]+c)*s[3]+d)*4 + b%4)
					} else {
						dst = ((((a/4)*s[1]+b)*s[2]+c)*s[3]+d)*4 + a%4
					}
					out[dst] = v[src]
				}
			}
		}
	}
	return out
}

// unblocked4 inverts blocked4 for axis 1: the NCHW tensor of shape from its texels.
func unblocked4(texels []float64, shape tensor.Shape) *tensor.Tensor {
	out := make([]float64, len(texels))
	for a := range shape[0] {
		for b := range shape[1] {
			for c := range shape[2] {
				for d := range shape[3] {
					out[((a*shape[1]+b)*shape[2]+c)*shape[3]+d] = texels[((((a*(shape[1]/4)+b/4)*shape[2]+c)*shape[3]+d)*4 + b%4)]
				}
			}
		}
	}
	return tensor.FromFloat64s(tensor.Float32, shape, out)
}

// texArg is one kernel argument: an image of the given texel size holding vals, or a
// buffer (width 0) holding vals.
type texArg struct {
	width, height int
	vals          []float64
}

// launchTextures lowers f (GPU pipeline, launch), prints it in OpenCL C, builds and
// runs it on d over args (the last is the output image) and returns the output's
// texels as floats.
func launchTextures(t *testing.T, d *opencl.Device, f *loopir.PrimFunc, args []texArg) []float64 {
	t.Helper()
	low, err := passes.GPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	g, launch, err := passes.DeriveLaunch(low)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, g)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := d.Build(src.Code, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, src.Code)
	}
	mod, k := loadKernel(t, d, bin, src.Kernels[0])
	defer mod.Close()
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	for _, a := range args {
		raw, err := tensor.FromFloat64s(tensor.Float32, tensor.Shape{len(a.vals)}, a.vals).Raw()
		if err != nil {
			t.Fatal(err)
		}
		var b devices.Buffer
		if a.width > 0 {
			b, err = d.AllocImage(a.width, a.height, devices.ImageRGBAF32)
		} else {
			b, err = d.Alloc(int64(len(raw)))
		}
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if err := d.CopyIn(b, raw); err != nil {
			t.Fatal(err)
		}
	}
	var geo devices.Geometry
	for i := range 3 {
		geo.Grid[i] = int(launch.Grid[i].(*loopir.IntImm).V)
		geo.Block[i] = int(launch.Block[i].(*loopir.IntImm).V)
	}
	if err := d.Launch(k, geo, bufs, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	out := args[len(args)-1]
	raw := make([]byte, 4*len(out.vals))
	if err := d.CopyOut(raw, bufs[len(bufs)-1]); err != nil {
		t.Fatal(err)
	}
	got, err := tensor.FromRaw(tensor.Float32, tensor.Shape{len(out.vals)}, raw)
	if err != nil {
		t.Fatal(err)
	}
	return got.Float64s()
}

// convRef is the reference evaluator's Conv of x by w (and b) with attributes a.
func convRef(t *testing.T, x, w, b *tensor.Tensor, a *graph.ConvAttrs) *tensor.Tensor {
	t.Helper()
	bl := graph.NewBuilder("main")
	in := []*graph.Value{bl.Param("x", graph.TensorType(tensor.Float32, graph.Const(int64(x.Shape[0])), graph.Const(int64(x.Shape[1])), graph.Const(int64(x.Shape[2])), graph.Const(int64(x.Shape[3])))), bl.Const("w", w)}
	if b != nil {
		in = append(in, bl.Const("b", b))
	}
	outs, err := bl.Node(graph.OpConv, a, 1, in...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bl.Module(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func TestTextureConv2DMatchesTheReferenceOnOpenCL(t *testing.T) {
	d := imagerOrSkip(t)
	for k, c := range []gpu.TexConv2D{
		{Name: "tex_conv3x3", N: 1, C: 8, H: 7, W: 6, M: 8, KH: 3, KW: 3, Strides: [2]int64{1, 1}, Dilations: [2]int64{1, 1}, Pads: [4]int64{1, 1, 1, 1}, Bias: true, Block: 64},
		{Name: "tex_conv1x1_s2_tail", N: 2, C: 4, H: 5, W: 6, M: 12, KH: 1, KW: 1, Strides: [2]int64{2, 2}, Dilations: [2]int64{1, 1}, Block: 16},
		{Name: "tex_conv_dilated_asym", N: 1, C: 4, H: 9, W: 8, M: 4, KH: 3, KW: 2, Strides: [2]int64{1, 2}, Dilations: [2]int64{2, 1}, Pads: [4]int64{2, 0, 1, 1}, Bias: true, Block: 32},
		{Name: "tex_conv_global_x_y", N: 1, C: 4, H: 4, W: 5, M: 8, KH: 3, KW: 3, Strides: [2]int64{1, 1}, Dilations: [2]int64{1, 1}, Pads: [4]int64{1, 1, 1, 1}, GlobalX: true, GlobalY: true, Block: 64},
		{Name: "tex_conv_plain_out", N: 1, C: 8, H: 5, W: 5, M: 8, KH: 3, KW: 3, Strides: [2]int64{1, 1}, Dilations: [2]int64{1, 1}, Pads: [4]int64{0, 1, 2, 1}, Bias: true, PlainOut: true, Block: 64},
	} {
		t.Run(c.Name, func(t *testing.T) {
			f, err := c.Func()
			if err != nil {
				t.Fatal(err)
			}
			x := randomTensor(tensor.Shape{int(c.N), int(c.C), int(c.H), int(c.W)}, uint64(3*k+1))
			w := randomTensor(tensor.Shape{int(c.M), int(c.C), int(c.KH), int(c.KW)}, uint64(3*k+2))
			var b *tensor.Tensor
			args := []texArg{
				{int(c.W), int(c.N * c.C / 4 * c.H), blocked4(x, 1)},
				{int(c.C * c.KH * c.KW), int(c.M / 4), blocked4(w, 0)},
			}
			if c.GlobalX {
				args[0].width = 0 // the same blocked values in a buffer
			}
			if c.GlobalW {
				args[1].width = 0
			}
			if c.Bias {
				b = randomTensor(tensor.Shape{int(c.M)}, uint64(3*k+3))
				args = append(args, texArg{vals: b.Float64s()})
			}
			outShape := tensor.Shape{int(c.N), int(c.M), int(c.OutH), int(c.OutW)}
			var got *tensor.Tensor
			if c.PlainOut {
				args = append(args, texArg{vals: make([]float64, outShape.NumElements())})
				got = tensor.FromFloat64s(tensor.Float32, outShape, launchTextures(t, d, f, args))
			} else {
				args = append(args, texArg{int(c.OutW), int(c.N * c.M / 4 * c.OutH), make([]float64, outShape.NumElements())})
				if c.GlobalY {
					args[len(args)-1].width = 0
				}
				got = unblocked4(launchTextures(t, d, f, args), outShape)
			}
			want := convRef(t, x, w, b, &graph.ConvAttrs{KernelShape: []int64{c.KH, c.KW}, Strides: c.Strides[:], Dilations: c.Dilations[:], Pads: []int64{c.Pads[0], c.Pads[1], c.Pads[2], c.Pads[3]}, Group: 1})
			nt.CloseTensor(t, fmt.Sprintf("%s on %s", c.Name, d.Info().Name), got, want)
		})
	}
}

func TestTextureInjectiveMatchesTheReferenceOnOpenCL(t *testing.T) {
	d := imagerOrSkip(t)
	const n, c, h, w = 2, 8, 3, 5
	shape := tensor.Shape{n, c, h, w}
	bl := graph.NewBuilder("main")
	typ := graph.TensorType(tensor.Float32, graph.Const(n), graph.Const(c), graph.Const(h), graph.Const(w))
	xa, xb := bl.Param("a", typ), bl.Param("b", typ)
	outs, err := bl.Node(graph.OpAdd, nil, 1, xa, xb)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bl.Module(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	phys := []loopir.Expr{loopir.Int(n), loopir.Int(c / 4), loopir.Int(h), loopir.Int(w), loopir.Int(4)}
	in := []kernels.Input{{T: te.Placeholder("A", tensor.Float32, phys...)}, {T: te.Placeholder("B", tensor.Float32, phys...)}}
	impl, err := kernels.Generic(kernels.Default(), "tex_add", outs[0].Def, in, func(s *schedule.Schedule) error {
		return gpu.ScheduleTextureInjective(s, 32) // 60 texels: a tail in the second block
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gpu.Texturize(impl.Func, map[int]loopir.Packing{0: loopir.PackNCHW4c, 1: loopir.PackNCHW4c, 2: loopir.PackNCHW4c})
	if err != nil {
		t.Fatal(err)
	}
	a, b := randomTensor(shape, 1), randomTensor(shape, 2)
	img := func(vals []float64) texArg { return texArg{w, n * c / 4 * h, vals} }
	got := unblocked4(launchTextures(t, d, f, []texArg{img(blocked4(a, 1)), img(blocked4(b, 1)), img(make([]float64, shape.NumElements()))}), shape)
	res, err := ref.Eval(m, map[string]ref.Value{"a": a, "b": b}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nt.CloseTensor(t, "tex_add", got, res[0].(*tensor.Tensor))
}
