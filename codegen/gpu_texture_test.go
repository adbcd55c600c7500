package codegen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/tensor"
)

// texKernel is a kernel over [1, 2, 3, 5, 4] NCHW4c textures and buffers: c bound to
// blockIdx.y, h to blockIdx.x, w to threadIdx.x, then a serial lane loop l storing
// out[0, c, h, w, l] = value(in[0, c, h, w, l]), lowered by the GPU pipeline.
func texKernel(t *testing.T, name string, in, out *loopir.Buffer, value func(loopir.Expr) loopir.Expr) *loopir.PrimFunc {
	t.Helper()
	c, h, w, l := loopir.NewVar("c"), loopir.NewVar("h"), loopir.NewVar("w"), loopir.NewVar("l")
	idx := []loopir.Expr{loopir.Int(0), c, h, w, l}
	loop := func(v *loopir.Var, n int64, k loopir.ForKind, body loopir.Stmt) *loopir.For {
		return &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(n), Kind: k, Body: body}
	}
	f := &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{in, out},
		Body: loop(c, 2, loopir.Bound(loopir.BlockIdxY),
			loop(h, 3, loopir.Bound(loopir.BlockIdxX),
				loop(w, 5, loopir.Bound(loopir.ThreadIdxX),
					loop(l, 4, loopir.Serial, &loopir.Store{Buf: out, Index: idx, Value: value(&loopir.Load{Buf: in, Index: idx})}))))}
	low, err := passes.GPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	return low
}

func texBuf(name string, scope string) *loopir.Buffer {
	return &loopir.Buffer{Name: name, DT: tensor.Float32, Scope: scope,
		Shape: []loopir.Expr{loopir.Int(1), loopir.Int(2), loopir.Int(3), loopir.Int(5), loopir.Int(4)}}
}

func identity(x loopir.Expr) loopir.Expr { return x }

// TestGoldenOpenCLTextureKernels prints texture kernels in OpenCL C: image parameters
// read-only or write-only by use, the sampler, texel reads with constant lanes, a whole
// texel write, and the run-time lane select of a texture unpacked into a buffer.
func TestGoldenOpenCLTextureKernels(t *testing.T) {
	relu := texKernel(t, "tex_relu", texBuf("X", loopir.ScopeTexture), texBuf("Y", loopir.ScopeTexture), func(x loopir.Expr) loopir.Expr {
		return loopir.Bin(loopir.Max, x, loopir.Float(0, tensor.Float32))
	})
	unpack := texKernel(t, "tex_unpack", texBuf("X", loopir.ScopeTexture), texBuf("Y", loopir.ScopeGlobal), identity)
	pack := texKernel(t, "tex_pack", texBuf("X", loopir.ScopeGlobal), texBuf("Y", loopir.ScopeTexture), identity)
	src, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, relu, unpack, pack)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "gpu_texture.cl", src.Code)
	for _, want := range []string{
		"__kernel void v_tex_relu(__read_only image2d_t v_X, __write_only image2d_t v_Y, __global i64 *kiln_status) {",
		"const sampler_t kiln_smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;",
		"write_imagef(v_Y, (int2)((int)(v_w), (int)(",
		"read_imagef(v_X, kiln_smp, (int2)((int)(v_w), (int)(",
		"kiln_lane(read_imagef(",
	} {
		if !strings.Contains(src.Code, want) {
			t.Errorf("the unit lacks %q:\n%s", want, src.Code)
		}
	}
}

func TestDialectsRefuseTexturesTheyCannotPrint(t *testing.T) {
	relu := texKernel(t, "tex_relu", texBuf("X", loopir.ScopeTexture), texBuf("Y", loopir.ScopeTexture), identity)
	if _, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, relu); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("CUDA with images: err = %v, want ErrUnsupported", err)
	}
	// an element access of a texture: FlattenTextures did not run
	x, y := texBuf("X", loopir.ScopeTexture), texBuf("Y", loopir.ScopeGlobal)
	zero := []loopir.Expr{loopir.Int(0), loopir.Int(0), loopir.Int(0), loopir.Int(0), loopir.Int(0)}
	raw := &loopir.PrimFunc{Name: "raw", Params: []*loopir.Buffer{x, y},
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Int(0)}, Value: &loopir.Load{Buf: x, Index: zero}}}
	if _, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, raw); !errors.Is(err, codegen.ErrUnsupported) || !strings.Contains(err.Error(), "by element") {
		t.Errorf("OpenCL with an element access of a texture: err = %v, want ErrUnsupported", err)
	}
	// one image read and written
	both := &loopir.PrimFunc{Name: "both", Params: []*loopir.Buffer{x},
		Body: &loopir.TexWrite{Buf: x, X: loopir.Int(0), Y: loopir.Int(0), Value: [4]loopir.Expr{
			&loopir.TexRead{Buf: x, X: loopir.Int(1), Y: loopir.Int(0), Lane: loopir.Int(0)},
			loopir.Float(0, tensor.Float32), loopir.Float(0, tensor.Float32), loopir.Float(0, tensor.Float32)}}}
	if _, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, both); !errors.Is(err, codegen.ErrUnsupported) || !strings.Contains(err.Error(), "both read and written") {
		t.Errorf("OpenCL with an image read and written: err = %v, want ErrUnsupported", err)
	}
	if _, err := codegen.EmitC(relu); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("C with images: err = %v, want ErrUnsupported", err)
	}
}
