package roofline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/target"
)

// Machine is a roofline measured on a machine.
type Machine struct {
	Name       string // the CPU model
	Threads    int
	VectorBits int     // the FMA fixture's vector width
	PeakFLOPs  float64 // FLOP/s
	Bandwidth  float64 // bytes/s, STREAM triad
	ArrayBytes int64   // bytes of each triad array, all threads together
	Clock      Clock   // what the fixtures were timed with
}

// Options say how to measure.
type Options struct {
	Threads    int   // at least 1
	Reps       int   // repetitions of each measurement, the median kept (0: 11)
	PeakIters  int64 // FMA iterations per chain in one repetition (0: 20 million)
	ArrayBytes int64 // each triad array (0: DefaultArrayBytes)
}

// DefaultArrayBytes is four times the last-level cache that sysfs reports (32 MiB
// assumed where it reports none): each triad array, so that no array stays cached
// between passes.
func DefaultArrayBytes() int64 {
	llc := lastLevelCache()
	if llc <= 0 {
		llc = 32 << 20
	}
	return 4 * llc
}

// lastLevelCache reads the size of cpu0's highest-level cache from sysfs (0: unknown).
func lastLevelCache() int64 {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	best, size := 0, int64(0)
	for _, d := range dirs {
		lb, err1 := os.ReadFile(filepath.Join(d, "level"))
		sb, err2 := os.ReadFile(filepath.Join(d, "size"))
		if err1 != nil || err2 != nil {
			continue
		}
		level, err := strconv.Atoi(strings.TrimSpace(string(lb)))
		if err != nil || level < best {
			continue
		}
		s := strings.TrimSpace(string(sb))
		mult := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			continue
		}
		best, size = level, n*mult
	}
	return size
}

// Meter holds the measuring fixtures built for a CPU device.
type Meter struct {
	dev               *cpu.Device
	mod               devices.Module
	peak, fill, triad devices.Kernel
	bits              int     // vector width of the FMA fixture
	flopsPerIter      float64 // of the FMA fixture, all chains
}

// NewMeter builds the fixtures with the device's compiler (and its flags).
func NewMeter(dev *cpu.Device) (*Meter, error) {
	bits := max(target.Host().VectorBits, 128)
	peakSrc, flops := peakFixture(bits)
	bin, err := dev.Compiler().Build(context.Background(), peakSrc+streamFixture)
	if err != nil {
		return nil, fmt.Errorf("roofline fixtures: %w", err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		return nil, fmt.Errorf("roofline fixtures: %w", err)
	}
	m := &Meter{dev: dev, mod: mod, bits: bits, flopsPerIter: flops}
	for name, k := range map[string]*devices.Kernel{"kiln_fma_peak": &m.peak, "kiln_stream_fill": &m.fill, "kiln_stream_triad": &m.triad} {
		if *k, err = mod.Kernel(name); err != nil {
			mod.Close()
			return nil, fmt.Errorf("roofline fixtures: %w", err)
		}
	}
	return m, nil
}

// Close unloads the fixtures.
func (m *Meter) Close() error { return m.mod.Close() }

// Bits is the vector width the FMA fixture uses.
func (m *Meter) Bits() int { return m.bits }

// Measure measures the machine's roofline on opts.Threads threads.
func (m *Meter) Measure(opts Options) (Machine, error) {
	if opts.Threads < 1 {
		return Machine{}, fmt.Errorf("roofline: %d threads", opts.Threads)
	}
	reps := opts.Reps
	if reps <= 0 {
		reps = 11
	}
	iters := opts.PeakIters
	if iters <= 0 {
		iters = 20_000_000
	}
	arr := opts.ArrayBytes
	if arr <= 0 {
		arr = DefaultArrayBytes()
	}
	mc := Machine{Name: m.dev.Info().Name, Threads: opts.Threads, VectorBits: m.bits, ArrayBytes: arr, Clock: ClockFor(opts.Threads)}
	var peaks []float64
	for range reps {
		p, err := m.Peak(opts.Threads, iters)
		if err != nil {
			return Machine{}, err
		}
		peaks = append(peaks, p)
	}
	mc.PeakFLOPs = median(peaks)
	var err error
	if mc.Bandwidth, err = m.Bandwidth(opts.Threads, arr, reps); err != nil {
		return Machine{}, err
	}
	return mc, nil
}

// Peak runs the FMA fixture on threads threads at once for iters iterations each and
// returns its rate in FLOP/s (one measurement).
func (m *Meter) Peak(threads int, iters int64) (float64, error) {
	secs, err := onThreads(threads, func(int) (func() error, func(), error) {
		bufs := make([]devices.Buffer, 2)
		for i, n := range []int64{18 * 64, 64} { // operands of the widest fixture (16 chains + 2 of 64 bytes)
			b, err := m.dev.Alloc(n)
			if err != nil {
				m.free(bufs)
				return nil, nil, err
			}
			bufs[i] = b
		}
		run := func() error { return m.dev.Launch(m.peak, devices.Geometry{}, bufs, []int64{iters}) }
		return run, func() { m.free(bufs) }, nil
	})
	if err != nil {
		return 0, fmt.Errorf("roofline: FMA peak: %w", err)
	}
	return float64(iters) * m.flopsPerIter * float64(threads) / secs, nil
}

// Bandwidth runs the triad over arrays of arrayBytes each, split between threads
// threads, reps times after a pass that fills them, and returns the median rate in
// bytes/s (12 bytes per element).
func (m *Meter) Bandwidth(threads int, arrayBytes int64, reps int) (float64, error) {
	per := arrayBytes / 4 / int64(threads) // elements of each thread's arrays
	if per < 1 {
		return 0, fmt.Errorf("roofline: triad arrays of %d bytes on %d threads", arrayBytes, threads)
	}
	var rates []float64
	err := func() error {
		bufs := make([][]devices.Buffer, threads)
		defer func() {
			for _, b := range bufs {
				m.free(b)
			}
		}()
		for t := range bufs {
			for range 3 {
				b, err := m.dev.Alloc(4 * per)
				if err != nil {
					return err
				}
				bufs[t] = append(bufs[t], b)
			}
		}
		dims := []int64{per}
		// each thread fills its own arrays (their pages are first touched where they run)
		if _, err := onThreads(threads, func(t int) (func() error, func(), error) {
			return func() error { return m.dev.Launch(m.fill, devices.Geometry{}, bufs[t], dims) }, func() {}, nil
		}); err != nil {
			return err
		}
		for range max(reps, 1) {
			secs, err := onThreads(threads, func(t int) (func() error, func(), error) {
				return func() error { return m.dev.Launch(m.triad, devices.Geometry{}, bufs[t], dims) }, func() {}, nil
			})
			if err != nil {
				return err
			}
			rates = append(rates, float64(12*per*int64(threads))/secs)
		}
		return nil
	}()
	if err != nil {
		return 0, fmt.Errorf("roofline: triad: %w", err)
	}
	return median(rates), nil
}

func (m *Meter) free(bufs []devices.Buffer) {
	for _, b := range bufs {
		if b != nil {
			m.dev.Free(b)
		}
	}
}

// onThreads runs one piece of work on each of threads OS threads at once and returns
// the seconds it took: by ClockFor(threads), measured around the work on its own
// thread for one thread, the wall time from the first start to the last end for
// several. setup prepares thread t's work (untimed) and a cleanup.
func onThreads(threads int, setup func(t int) (run func() error, cleanup func(), err error)) (float64, error) {
	clock := ClockFor(threads)
	runs := make([]func() error, threads)
	for t := range threads {
		run, cleanup, err := setup(t)
		if err != nil {
			return 0, err
		}
		defer cleanup()
		runs[t] = run
	}
	if threads == 1 {
		var took float64
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := clock.Now()
			err = runs[0]()
			took = (clock.Now() - start).Seconds()
		}()
		<-done
		return took, err
	}
	errs := make([]error, threads)
	var wg sync.WaitGroup
	start := clock.Now()
	for t := range threads {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			errs[t] = runs[t]()
		})
	}
	wg.Wait()
	took := (clock.Now() - start).Seconds()
	for _, e := range errs {
		if e != nil {
			return 0, e
		}
	}
	return took, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// peakFixture is the FMA-peak fixture for vectors of bits bits: independent vector
// accumulators, each loaded from a different place (so the compiler cannot merge them),
// updated with fused multiply-adds for dims[0] iterations. The chains must cover the FMA
// latency times the FMA ports (4 × 2 on current x86 cores) and, with the two operands,
// fit in the register file: 16 chains of the 32 AVX-512 registers, 12 of the 16 AVX2 or
// SSE ones (more spill to memory and measure the stack instead). It measures the
// machine, not an operator, and returns the source and the flops of one iteration.
func peakFixture(bits int) (string, float64) {
	chains := 12
	if bits >= 512 {
		chains = 16
	}
	var b strings.Builder
	fmt.Fprintf(&b, "typedef float vec __attribute__((vector_size(%d)));\n", bits/8)
	b.WriteString("int kiln_fma_peak(void *const *bufs, const long long *dims, void *ctx) {\n")
	b.WriteString("\tconst vec *in = (const vec *)bufs[0];\n")
	for i := range chains {
		fmt.Fprintf(&b, "\tvec a%d = in[%d];\n", i, i)
	}
	fmt.Fprintf(&b, "\tvec x = in[%d], y = in[%d];\n", chains, chains+1)
	b.WriteString("\tfor (long long i = 0; i < dims[0]; i++) {\n")
	sum := make([]string, chains)
	for i := range chains {
		fmt.Fprintf(&b, "\t\ta%d = a%d * x + y;\n", i, i)
		sum[i] = fmt.Sprintf("a%d", i)
	}
	b.WriteString("\t}\n")
	fmt.Fprintf(&b, "\t*(vec *)bufs[1] = %s;\n\treturn 0;\n}\n", strings.Join(sum, " + "))
	return b.String(), float64(chains * bits / 32 * 2)
}

// streamFixture fills the three triad arrays (writing every page) and runs the triad
// a[i] = b[i] + 3·c[i] over dims[0] float32 elements.
const streamFixture = `
int kiln_stream_fill(void *const *bufs, const long long *dims, void *ctx) {
	float *a = (float *)bufs[0], *b = (float *)bufs[1], *c = (float *)bufs[2];
	for (long long i = 0; i < dims[0]; i++) { a[i] = 0.0f; b[i] = 1.0f; c[i] = 2.0f; }
	return 0;
}
int kiln_stream_triad(void *const *bufs, const long long *dims, void *ctx) {
	float *__restrict a = (float *)bufs[0];
	const float *__restrict b = (const float *)bufs[1], *__restrict c = (const float *)bufs[2];
	for (long long i = 0; i < dims[0]; i++) a[i] = b[i] + 3.0f * c[i];
	return 0;
}
`
