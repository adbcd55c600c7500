// Command kernelbench measures the tensor compiler against the machine: the FMA peak (a
// register-only microbenchmark compiled by the same C compiler), the GFLOP/s of the
// generated sgemm at 1024³, and the C compile time per kernel. It is a program, not a
// test: timings on shared machines swing, so it reports medians of repeated runs.
//
//	go run ./bench/kernelbench [-reps 5]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// peakSource is the FMA-peak fixture: 12 independent vector accumulators updated with
// fused multiply-adds for dims[0] iterations. It measures the machine, not an operator.
const peakSource = `
typedef float v16 __attribute__((vector_size(64)));
int kiln_fma_peak(void *const *bufs, const long long *dims, void *ctx) {
	v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0};
	v16 a6 = {0}, a7 = {0}, a8 = {0}, a9 = {0}, a10 = {0}, a11 = {0};
	v16 x = *(v16 *)bufs[0], y = *(v16 *)bufs[1];
	for (long long i = 0; i < dims[0]; i++) {
		a0 = a0 * x + y; a1 = a1 * x + y; a2 = a2 * x + y; a3 = a3 * x + y;
		a4 = a4 * x + y; a5 = a5 * x + y; a6 = a6 * x + y; a7 = a7 * x + y;
		a8 = a8 * x + y; a9 = a9 * x + y; a10 = a10 * x + y; a11 = a11 * x + y;
	}
	*(v16 *)bufs[2] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
	return 0;
}
`

func main() {
	reps := flag.Int("reps", 5, "repetitions per measurement (the median is reported)")
	flag.Parse()
	if err := run(*reps); err != nil {
		fmt.Fprintln(os.Stderr, "kernelbench:", err)
		os.Exit(1)
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func run(reps int) error {
	dev, err := cpu.Open(cpu.Options{})
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Printf("machine: %s, %d cores; compiler: %s\n", dev.Info().Name, runtime.NumCPU(), dev.Compiler().Version)
	peak1, peak2, err := fmaPeak(dev, reps)
	if err != nil {
		return err
	}
	fmt.Printf("FMA peak (fp32, AVX-512 vector extensions): 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s\n", peak1, peak2)

	dev1, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		return err
	}
	defer dev1.Close()
	dev2, err := cpu.Open(cpu.Options{Threads: 2})
	if err != nil {
		return err
	}
	defer dev2.Close()
	var compileTimes []time.Duration
	for _, cfg := range []struct {
		name     string
		sch      func(*schedule.Schedule) error
		parallel bool
	}{
		{"naive", func(*schedule.Schedule) error { return nil }, false},
		{"tiled", tileMatmul, true},
	} {
		f := matmul(1024)
		s := schedule.New(f)
		if err := cfg.sch(s); err != nil {
			return err
		}
		g, err := passes.CPUPipeline().Run(s.Func())
		if err != nil {
			return err
		}
		src, err := codegen.EmitC(g)
		if err != nil {
			return err
		}
		start := time.Now()
		bin, err := dev.Compiler().Build(context.Background(), src.Code)
		if err != nil {
			return err
		}
		compileTimes = append(compileTimes, time.Since(start))
		one, err := timeSgemm(dev1, bin, src.Kernels[0], 1024, reps)
		if err != nil {
			return err
		}
		two := "n/a (serial schedule)"
		if cfg.parallel {
			g2, err := timeSgemm(dev2, bin, src.Kernels[0], 1024, reps)
			if err != nil {
				return err
			}
			two = fmt.Sprintf("%7.2f GFLOP/s (%.1f%% of the 2-thread peak)", g2, 100*g2/peak2)
		}
		fmt.Printf("sgemm 1024³ %-5s 1 thread: %7.2f GFLOP/s (%.1f%% of the 1-thread peak); 2 threads: %s\n",
			cfg.name, one, 100*one/peak1, two)
	}
	fmt.Printf("C compile time per kernel: median %v (of %d)\n", median(compileTimes).Round(time.Millisecond), len(compileTimes))
	fmt.Println("conv2d (resnet18 3x3 64->64 56x56): not measured yet (no conv compute definition in kernels)")
	return nil
}

func fmaPeak(dev *cpu.Device, reps int) (float64, float64, error) {
	bin, err := dev.Compiler().Build(context.Background(), peakSource)
	if err != nil {
		return 0, 0, err
	}
	mod, err := dev.Load(bin)
	if err != nil {
		return 0, 0, err
	}
	defer mod.Close()
	k, err := mod.Kernel("kiln_fma_peak")
	if err != nil {
		return 0, 0, err
	}
	const iters = 50_000_000
	flops := float64(iters) * 12 * 16 * 2
	measure := func(threads int) (float64, error) {
		var times []time.Duration
		for r := 0; r < reps; r++ {
			var wg sync.WaitGroup
			errs := make([]error, threads)
			start := time.Now()
			for t := 0; t < threads; t++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					bufs := make([]devices.Buffer, 3)
					for i := range bufs {
						bufs[i], _ = dev.Alloc(64)
						defer dev.Free(bufs[i])
					}
					errs[t] = dev.Launch(k, devices.Geometry{}, bufs, []int64{iters})
				}()
			}
			wg.Wait()
			times = append(times, time.Since(start))
			for _, e := range errs {
				if e != nil {
					return 0, e
				}
			}
		}
		return flops * float64(threads) / median(times).Seconds() / 1e9, nil
	}
	p1, err := measure(1)
	if err != nil {
		return 0, 0, err
	}
	p2, err := measure(2)
	return p1, p2, err
}

func matmul(n int64) *loopir.PrimFunc {
	N := loopir.Int(n)
	a := te.Placeholder("A", tensor.Float32, N, N)
	b := te.Placeholder("B", tensor.Float32, N, N)
	r := te.RAxis("k", N)
	c := te.Compute("C", []loopir.Expr{N, N}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	f, err := te.Lower("sgemm", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return f
}

// tileMatmul: i-k-j order with the j loop split for vectors, the init hoisted out of the
// reduction, and the row loop parallel (the best the primitives available today express).
func tileMatmul(s *schedule.Schedule) error {
	b, err := s.GetBlock("C")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(b)
	if err != nil {
		return err
	}
	j, err := s.Split(l[1], []int64{-1, 64})
	if err != nil {
		return err
	}
	if err := s.Reorder(l[0], j[0], l[2], j[1]); err != nil {
		return err
	}
	if _, err := s.DecomposeReduction(b, l[2]); err != nil {
		return err
	}
	if err := s.Vectorize(j[1]); err != nil {
		return err
	}
	return s.Parallel(l[0])
}

func timeSgemm(dev *cpu.Device, bin []byte, name string, n, reps int) (float64, error) {
	mod, err := dev.Load(bin)
	if err != nil {
		return 0, err
	}
	defer mod.Close()
	k, err := mod.Kernel(name)
	if err != nil {
		return 0, err
	}
	bufs := make([]devices.Buffer, 3)
	for i := range bufs {
		if bufs[i], err = dev.Alloc(int64(4 * n * n)); err != nil {
			return 0, err
		}
		defer dev.Free(bufs[i])
	}
	var times []time.Duration
	for r := 0; r < reps; r++ {
		start := time.Now()
		if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil {
			return 0, err
		}
		times = append(times, time.Since(start))
	}
	return 2 * float64(n) * float64(n) * float64(n) / median(times).Seconds() / 1e9, nil
}
