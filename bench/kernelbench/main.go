// Command kernelbench measures the tensor compiler against the machine: the FMA peak (a
// register-only microbenchmark compiled by the same C compiler) and the memory
// bandwidth (a STREAM triad), both from internal/roofline, the GFLOP/s of the
// generated sgemm at 1024³, and the C compile time per kernel. It is a program, not a
// test: timings on shared machines swing, so it reports medians of repeated runs.
//
//	go run ./bench/kernelbench [-reps 5]
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/roofline"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	kcpu "github.com/kilnrt/kiln/kernels/cpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

var intrinName = flag.String("intrin", "", "GEMM micro-kernel to use, by the name of its update form (default: the best for this CPU)")

func main() {
	reps := flag.Int("reps", 11, "repetitions per measurement (the median is reported)")
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
	meter, err := roofline.NewMeter(dev)
	if err != nil {
		return err
	}
	defer meter.Close()
	var peak, bw [3]float64
	for _, threads := range []int{1, 2} {
		mc, err := meter.Measure(roofline.Options{Threads: threads, Reps: reps})
		if err != nil {
			return err
		}
		peak[threads], bw[threads] = mc.PeakFLOPs/1e9, mc.Bandwidth/1e9
	}
	peak1, peak2 := peak[1], peak[2]
	fmt.Printf("FMA peak (fp32, %d-bit vectors): 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s\n", meter.Bits(), peak1, peak2)
	fmt.Printf("memory bandwidth (STREAM triad, arrays of %d MiB): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", roofline.DefaultArrayBytes()>>20, bw[1], bw[2])

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
	gemm := intrin.GemmFor(target.Host())
	if *intrinName != "" {
		found := false
		for _, g := range intrin.Gemms() {
			if g.Update.Name == *intrinName {
				gemm, found = g, true
			}
		}
		if !found {
			return fmt.Errorf("no GEMM micro-kernel %q (see intrin.Gemms)", *intrinName)
		}
	}
	fmt.Printf("micro-kernel: %s; percentages: median kernel GFLOP/s ÷ FMA peak measured just before and after it on the same threads (on one thread both timed by its CPU time)\n", gemm.Update.Name)
	for _, kb := range benchKernels(gemm) {
		f, err := kb.build()
		if err != nil {
			return fmt.Errorf("%s: %w", kb.name, err)
		}
		g, err := passes.CPUPipeline().Run(f)
		if err != nil {
			return err
		}
		src, err := codegen.EmitCWith(codegen.COptions{Parallel: kb.runtime}, g)
		if err != nil {
			return err
		}
		cc := *dev.Compiler()
		if kb.runtime == codegen.OpenMP {
			cc.Flags = append(append([]string{}, cc.Flags...), "-fopenmp")
		}
		start := time.Now()
		bin, err := cc.Build(context.Background(), src.Code)
		if err != nil {
			return err
		}
		if kb.runtime != codegen.OpenMP {
			compileTimes = append(compileTimes, time.Since(start))
		}
		one, r1, err := timeKernel(dev1, meter, 1, bin, src.Kernels[0], kb, reps)
		if err != nil {
			return err
		}
		two := "n/a (serial schedule)"
		if kb.parallel {
			g2, r2, err := timeKernel(dev2, meter, 2, bin, src.Kernels[0], kb, reps)
			if err != nil {
				return err
			}
			two = fmt.Sprintf("%7.2f GFLOP/s = %5.1f%% (%v)", g2, 100*r2, time.Duration(kb.flops/g2).Round(time.Microsecond))
		}
		fmt.Printf("%-34s 1 thread: %7.2f GFLOP/s = %5.1f%% (%v); 2 threads: %s\n",
			kb.name, one, 100*r1, time.Duration(kb.flops/one).Round(time.Microsecond), two)
	}
	fmt.Printf("C compile time per kernel: median %v (of %d)\n", median(compileTimes).Round(time.Millisecond), len(compileTimes))
	return nil
}

// benchKernel is one generated kernel to time: its scheduled function, its parameter
// sizes in floats (inputs, then the output) and its floating-point operation count.
type benchKernel struct {
	name     string
	build    func() (*loopir.PrimFunc, error)
	sizes    []int64
	flops    float64
	parallel bool
	runtime  codegen.ParallelRuntime
}

func benchKernels(gemm intrin.Gemm) []benchKernel {
	const n = 1024
	mm := []int64{n * n, n * n, n * n}
	sgemm := func(sch func(*schedule.Schedule) error) func() (*loopir.PrimFunc, error) {
		return func() (*loopir.PrimFunc, error) {
			s := schedule.New(matmul(n))
			return s.Func(), sch(s)
		}
	}
	// resnet18's layer1 convolution: 3×3, 64 → 64 channels, 56×56, padding 1
	const c, hw, k = 64, 56, 3
	mb := gemm.NR
	cb := mb
	conv := func() (*loopir.PrimFunc, error) {
		x := te.Placeholder("x", tensor.Float32, loopir.Int(1), loopir.Int(c/cb), loopir.Int(hw), loopir.Int(hw), loopir.Int(cb))
		w := te.Placeholder("w", tensor.Float32, loopir.Int(c/mb), loopir.Int(c/cb), loopir.Int(k), loopir.Int(k*cb), loopir.Int(mb))
		_, y, err := kcpu.Conv2DNCHWc(x, w, kernels.Conv2DAttrs{Strides: [2]int64{1, 1}, Pads: [2]int64{1, 1}, Dilations: [2]int64{1, 1}, Groups: 1})
		if err != nil {
			return nil, err
		}
		f, err := te.Lower("conv2d", []*te.Tensor{x, w}, []*te.Tensor{y})
		if err != nil {
			return nil, err
		}
		s := schedule.New(f)
		return s.Func(), kcpu.ScheduleConv2DNCHWc(s, gemm, true)
	}
	return []benchKernel{
		{"sgemm 1024³ naive", sgemm(func(*schedule.Schedule) error { return nil }), mm, 2 * n * n * n, false, codegen.Pool},
		{"sgemm 1024³ vectorized", sgemm(tileMatmul), mm, 2 * n * n * n, true, codegen.Pool},
		{"sgemm 1024³ tensorized", func() (*loopir.PrimFunc, error) {
			a := te.Placeholder("A", tensor.Float32, loopir.Int(n), loopir.Int(n))
			b := te.Placeholder("B", tensor.Float32, loopir.Int(n), loopir.Int(n))
			out := kcpu.MatMulPacked(a, b, 0, gemm.NR)
			f, err := te.Lower("sgemm", []*te.Tensor{a, b}, []*te.Tensor{out})
			if err != nil {
				return nil, err
			}
			s := schedule.New(f)
			return s.Func(), kcpu.ScheduleMatMulPacked(s, gemm, kcpu.DefaultGemm)
		}, mm, 2 * n * n * n, true, codegen.Pool},
		{"conv2d 3x3 64->64 56x56 tensorized", conv, []int64{c * hw * hw, c * c * k * k, c * hw * hw}, 2 * c * c * k * k * hw * hw, true, codegen.Pool},
		// the parallel runtime: the same kernels with a fresh pthread fork-join per loop
		{"conv2d ... (spawn runtime)", conv, []int64{c * hw * hw, c * c * k * k, c * hw * hw}, 2 * c * c * k * k * hw * hw, true, codegen.Spawn},
		{"conv2d ... (OpenMP runtime)", conv, []int64{c * hw * hw, c * c * k * k, c * hw * hw}, 2 * c * c * k * k * hw * hw, true, codegen.OpenMP},
		{"add 2^18 (pool runtime)", addVectors(1 << 18), []int64{1 << 18, 1 << 18, 1 << 18}, 1 << 18, true, codegen.Pool},
		{"add 2^18 (spawn runtime)", addVectors(1 << 18), []int64{1 << 18, 1 << 18, 1 << 18}, 1 << 18, true, codegen.Spawn},
		{"add 2^18 (OpenMP runtime)", addVectors(1 << 18), []int64{1 << 18, 1 << 18, 1 << 18}, 1 << 18, true, codegen.OpenMP},
	}
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

// addVectors is C = A + B on n floats: rows of 4096 in parallel, each vectorized (a
// short, memory-bound kernel where the parallel runtime's overhead shows).
func addVectors(n int64) func() (*loopir.PrimFunc, error) {
	return func() (*loopir.PrimFunc, error) {
		a := te.Placeholder("A", tensor.Float32, loopir.Int(n))
		b := te.Placeholder("B", tensor.Float32, loopir.Int(n))
		c := te.Compute("C", []loopir.Expr{loopir.Int(n)}, func(i []loopir.Expr) loopir.Expr { return te.Add(a.At(i[0]), b.At(i[0])) })
		f, err := te.Lower("add", []*te.Tensor{a, b}, []*te.Tensor{c})
		if err != nil {
			return nil, err
		}
		s := schedule.New(f)
		blk, err := s.GetBlock("C")
		if err != nil {
			return nil, err
		}
		l, err := s.GetLoops(blk)
		if err != nil {
			return nil, err
		}
		parts, err := s.Split(l[0], []int64{-1, 4096})
		if err != nil {
			return nil, err
		}
		if err := s.Vectorize(parts[1]); err != nil {
			return nil, err
		}
		return s.Func(), s.Parallel(parts[0])
	}
}

// timeKernel returns the median GFLOP/s of a kernel (warm, back-to-back repetitions) and
// its ratio to the FMA peak measured on the same number of threads just before and just
// after those repetitions (machines here drift between runs; a ratio taken side by side
// does not), both timed by roofline.ClockFor(threads) (on one thread, the thread's CPU
// time: the kernel runs on the calling thread).
func timeKernel(dev *cpu.Device, meter *roofline.Meter, threads int, bin []byte, name string, kb benchKernel, reps int) (float64, float64, error) {
	clock := roofline.ClockFor(threads)
	mod, err := dev.Load(bin)
	if err != nil {
		return 0, 0, err
	}
	defer mod.Close()
	k, err := mod.Kernel(name)
	if err != nil {
		return 0, 0, err
	}
	bufs := make([]devices.Buffer, len(kb.sizes))
	for i, n := range kb.sizes {
		if bufs[i], err = dev.Alloc(4 * n); err != nil {
			return 0, 0, err
		}
		defer dev.Free(bufs[i])
		if err := dev.CopyIn(bufs[i], randomBytes(uint64(i+1), int(n))); err != nil {
			return 0, 0, err
		}
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil { // warm-up
		return 0, 0, err
	}
	// keep the Go runtime quiet while the kernel owns the cores
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := meter.Peak(threads, 20_000_000)
	if err != nil {
		return 0, 0, err
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil { // warm again
		return 0, 0, err
	}
	var rates []float64
	for r := 0; r < reps; r++ {
		start := clock.Now()
		if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil {
			return 0, 0, err
		}
		rates = append(rates, kb.flops/(clock.Now()-start).Seconds()/1e9)
	}
	after, err := meter.Peak(threads, 20_000_000)
	if err != nil {
		return 0, 0, err
	}
	slices.Sort(rates)
	return rates[len(rates)/2], rates[len(rates)/2] / ((before + after) / 2 / 1e9), nil
}

// randomBytes is n little-endian float32 values uniform in [-1, 1).
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(2*r.Float32()-1))
	}
	return b
}
