package gpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
)

// serialLaunch is f with every bound loop run in turn: the launch of f where each block
// and thread runs one iteration, one after the other. Every store of a launched kernel
// runs under every bound loop (DeriveLaunch checks it) and a bound loop drives no
// reduction (Bind checks it), so the order does not change the result.
func serialLaunch(f *loopir.PrimFunc) *loopir.PrimFunc {
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		l, ok := s.(*loopir.For)
		if !ok {
			return nil
		}
		if _, bound := l.Kind.Thread(); !bound {
			return nil
		}
		return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Body: l.Body, Annotations: l.Annotations}
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body}
}

// TestInjectiveKernelsMatchRefAsASerialLaunch runs every case's launched kernel (tail
// guards and launch extents included) on the CPU, each block and thread in turn, and
// compares with the reference evaluator: the schedule and the launch rule are checked
// on a machine without a GPU.
func TestInjectiveKernelsMatchRefAsASerialLaunch(t *testing.T) {
	emulateCases(t, cases(t))
}

// emulateCases runs every case's launched kernel on the CPU as a serial launch and
// compares with the reference evaluator.
func emulateCases(t *testing.T, cs []gcase) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tg := testGPU(t)
	for _, c := range cs {
		l := lower(t, c, tg)
		src, err := codegen.EmitC(serialLaunch(l.f))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bin, err := d.Compiler().Build(context.Background(), src.Code)
		if errors.Is(err, devices.ErrUnavailable) {
			testdata.NoCompiler(t, err)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mod, err := d.Load(bin)
		if err != nil {
			t.Fatal(err)
		}
		k, err := mod.Kernel(src.Kernels[0])
		if err != nil {
			t.Fatal(err)
		}
		for i, env := range c.binds {
			l.run(t, d, k, c.name, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
