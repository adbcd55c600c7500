package passes

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// texRelu is y = max(x, 0) over NCHW4c textures of shape [1, 2, 3, 5, 4]: c bound to
// blockIdx.y, h to blockIdx.x, w to threadIdx.x, then the lane loop l of kind lane.
func texRelu(lane loopir.ForKind) *loopir.PrimFunc {
	shape := []loopir.Expr{loopir.Int(1), loopir.Int(2), loopir.Int(3), loopir.Int(5), loopir.Int(4)}
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: shape, Scope: loopir.ScopeTexture}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: shape, Scope: loopir.ScopeTexture}
	c, h, w, l := loopir.NewVar("c"), loopir.NewVar("h"), loopir.NewVar("w"), loopir.NewVar("l")
	idx := []loopir.Expr{loopir.Int(0), c, h, w, l}
	store := &loopir.Store{Buf: y, Index: idx, Value: loopir.Bin(loopir.Max, &loopir.Load{Buf: x, Index: idx}, loopir.Float(0, tensor.Float32))}
	loop := func(v *loopir.Var, n int64, k loopir.ForKind, body loopir.Stmt) *loopir.For {
		return &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(n), Kind: k, Body: body}
	}
	return &loopir.PrimFunc{Name: "tex_relu", Params: []*loopir.Buffer{x, y},
		Body: loop(c, 2, loopir.Bound(loopir.BlockIdxY),
			loop(h, 3, loopir.Bound(loopir.BlockIdxX),
				loop(w, 5, loopir.Bound(loopir.ThreadIdxX),
					loop(l, 4, lane, store))))}
}

func TestFlattenTexturesWritesWholeTexelsAndReadsTheirLanes(t *testing.T) {
	f := texRelu(loopir.Serial)
	if err := loopir.Verify(f); err != nil {
		t.Fatal(err)
	}
	g := mustRun(t, GPUPipeline(), f)
	if err := loopir.Verify(g); err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(g)
	for _, want := range []string{
		"x: f32[1, 2, 3, 5, 4] texture(nchw4c)",
		"texwrite(y, w, ((c * 3) + h)) = [max(texread(x, w, ((c * 3) + h))[0], 0f), max(texread(x, w, ((c * 3) + h))[1], 0f), max(texread(x, w, ((c * 3) + h))[2], 0f), max(texread(x, w, ((c * 3) + h))[3], 0f)]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "for l") {
		t.Errorf("the lane loop is left:\n%s", text)
	}
	if _, _, err := DeriveLaunch(g); err != nil {
		t.Errorf("launch: %v", err)
	}
}

func TestFlattenTexturesRefusesATexelSplitBetweenThreads(t *testing.T) {
	f := texRelu(loopir.Bound(loopir.ThreadIdxY))
	_, err := GPUPipeline().Run(f)
	if !errors.Is(err, ErrTexture) || !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "tex_relu") {
		t.Fatalf("err = %v, want ErrTexture and ErrLaunch naming tex_relu", err)
	}
}

func TestFlattenTexturesLeavesKernelsWithoutTexturesAlone(t *testing.T) {
	f := rowSums(3, func(i, _, j loopir.Expr) []loopir.Expr { return []loopir.Expr{i, j} })
	g, err := FlattenTextures(f)
	if err != nil || g != f {
		t.Fatalf("FlattenTextures = %p, %v; want the kernel itself", g, err)
	}
}

func TestFlattenTexturesKeepsTheGuardOfALaneLoop(t *testing.T) {
	f := texRelu(loopir.Serial)
	var w *loopir.Var
	guarded := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		switch s := s.(type) {
		case *loopir.For:
			if s.Var.Name == "w" {
				w = s.Var
			}
		case *loopir.Store:
			return &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, s.Index[3], loopir.Int(4)), Then: s}
		}
		return nil
	})
	g, err := FlattenTextures(&loopir.PrimFunc{Name: f.Name, Params: f.Params, Body: guarded})
	if err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(g)
	if want := "if (w < 4) {\n          texwrite(y, w, "; w == nil || !strings.Contains(text, want) {
		t.Errorf("the kernel lacks %q:\n%s", want, text)
	}
}
