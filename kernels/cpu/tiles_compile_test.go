package cpu

import (
	"bytes"
	"context"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/codegen"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// isaFlags are the C compiler flags that enable a micro-kernel family's instruction set
// on x86-64 whatever the host has (the kernels only compile here; the tests that run
// them take the families the host can execute).
var isaFlags = map[string][]string{
	"avx512":  {"-mavx2", "-mfma", "-mavx512f", "-mavx512vl"},
	"avx2":    {"-mavx2", "-mfma"},
	"generic": nil,
}

// TestEveryMicroKernelCompilesForItsISA: every declared micro-kernel, in both forms
// (accumulating calls with a separate init, and zero-initializing calls), tensorized
// into a packed matmul with tails in every dimension, compiles with the C compiler for
// its own instruction set, including those the host cannot execute (AVX-512 on an AVX2
// machine).
func TestEveryMicroKernelCompilesForItsISA(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the families' flags are x86-64's; this host is %s", runtime.GOARCH)
	}
	cc, err := devcpu.FindCompiler()
	if err != nil {
		testdata.NoCompiler(t, err)
	}
	for _, g := range intrin.Gemms() {
		isa := strings.SplitN(strings.TrimPrefix(g.Update.Name, "kiln_gemm_f32_"), "_", 2)[0]
		flags, ok := isaFlags[isa]
		if !ok {
			t.Fatalf("%s: no compiler flags for family %q", g.Update.Name, isa)
		}
		for _, kc := range []int64{128, 1024} {
			const m, k = 37, 300
			n := 2*g.NR + 3
			a := te.Placeholder("a", tensor.Float32, loopir.Int(m), loopir.Int(k))
			b := te.Placeholder("b", tensor.Float32, loopir.Int(k), loopir.Int(n))
			f, err := te.Lower("mm", []*te.Tensor{a, b}, []*te.Tensor{MatMulPacked(a, b, g.MR, g.NR)})
			if err != nil {
				t.Fatal(err)
			}
			s := schedule.New(f)
			if err := ScheduleMatMulPacked(s, g, GemmConfig{KC: kc, MC: 2, Parallel: true}); err != nil {
				t.Fatalf("%s: %v", g.Update.Name, err)
			}
			low, err := passes.CPUPipeline().Run(s.Func())
			if err != nil {
				t.Fatal(err)
			}
			src, err := codegen.EmitC(low)
			if err != nil {
				t.Fatal(err)
			}
			call := g.Init.Name + "("
			if kc < k {
				call = g.Update.Name + "("
			}
			if !strings.Contains(src.Code, call) {
				t.Fatalf("%s: the generated C does not call %s)", g.Update.Name, call)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			args := append([]string{"-O2", "-march=x86-64", "-std=gnu11", "-c", "-x", "c", "-", "-o", "/dev/null"}, flags...)
			cmd := exec.CommandContext(ctx, cc.Path, args...)
			cmd.Stdin = strings.NewReader(src.Code)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			cancel()
			if err != nil {
				t.Errorf("%s (KC %d) does not compile with %v: %v\n%s", g.Update.Name, kc, flags, err, stderr.String())
			}
		}
	}
}
