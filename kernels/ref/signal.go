package ref

// DFT, STFT and MelWeightMatrix: direct sums in float64, as the definitions read.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func signalKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpDFT:             T(signalDFT),
		graph.OpSTFT:            T(signalSTFT),
		graph.OpMelWeightMatrix: T(signalMelWeightMatrix),
	}
}

// maxSignalLength bounds the lengths read from data (a DFT length, a frame count): the
// direct sums are quadratic.
const maxSignalLength = 1 << 20

func refIntScalar(t *tensor.Tensor, what string) (int64, error) {
	if t == nil || t.Len() != 1 || !t.DType.IsInt() {
		return 0, Badf("%s must be an integer scalar", what)
	}
	return t.Int64s()[0], nil
}

// twiddle is e^{sign·2πi·k·n/len} with k·n reduced modulo len first, so that large
// products lose no precision.
func twiddle(k, n, l int64, sign float64) (c, s float64) {
	th := sign * 2 * math.Pi * float64((k*n)%l) / float64(l)
	return math.Cos(th), math.Sin(th)
}

func signalDFT(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	if !x.DType.IsFloat() || r < 2 || (x.Shape[r-1] != 1 && x.Shape[r-1] != 2) {
		return nil, Badf("DFT input %v%v: want floats with a last axis of 1 or 2", x.DType, x.Shape)
	}
	ax := int64(-2)
	if len(in) > 2 && in[2] != nil {
		v, err := refIntScalar(in[2], "DFT axis")
		if err != nil {
			return nil, err
		}
		ax = v
	}
	// the axis counts over every axis but the trailing one of the complex parts
	if ax < 0 {
		ax += int64(r)
	}
	if ax < 0 || ax > int64(r)-2 {
		return nil, Badf("DFT axis %d out of range for an input of rank %d", ax, r)
	}
	axis := int(ax)
	l := int64(x.Shape[axis])
	size := l
	if len(in) > 1 && in[1] != nil {
		var err error
		if size, err = refIntScalar(in[1], "dft_length"); err != nil {
			return nil, err
		}
		if size < 1 || size > maxSignalLength {
			return nil, Badf("dft_length %d", size)
		}
	}
	a := attrs[graph.DFTAttrs](n)
	bins := size
	if a.Onesided != 0 {
		bins = size/2 + 1
	}
	sign, scale := -1.0, 1.0
	if a.Inverse != 0 {
		sign, scale = 1, 1/float64(size)
	}
	outShape := append(tensor.Shape{}, x.Shape...)
	outShape[axis], outShape[r-1] = int(bins), 2
	outer, inner := x.Shape[:axis].NumElements(), x.Shape[axis+1:r-1].NumElements()
	parts := x.Shape[r-1]
	xv := x.Float64s()
	out := make([]float64, outShape.NumElements())
	used := min(l, size)
	for o := range outer {
		for k := range bins {
			for i := range inner {
				var re, im float64
				for t := range used {
					p := ((o*int(l)+int(t))*inner + i) * parts
					xr, xi := xv[p], 0.0
					if parts == 2 {
						xi = xv[p+1]
					}
					c, s := twiddle(k, t, size, sign)
					re += xr*c - xi*s
					im += xr*s + xi*c
				}
				q := ((o*int(bins)+int(k))*inner + i) * 2
				out[q], out[q+1] = re*scale, im*scale
			}
		}
	}
	return one(tensor.FromFloat64s(x.DType, outShape, out)), nil
}

func signalSTFT(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if !x.DType.IsFloat() || len(x.Shape) != 3 || (x.Shape[2] != 1 && x.Shape[2] != 2) {
		return nil, Badf("STFT signal %v%v: want floats [batch, length, 1 or 2]", x.DType, x.Shape)
	}
	step, err := refIntScalar(in[1], "frame_step")
	if err != nil {
		return nil, err
	}
	var window []float64
	if len(in) > 2 && in[2] != nil {
		if len(in[2].Shape) != 1 {
			return nil, Badf("STFT window %v: want rank 1", in[2].Shape)
		}
		window = in[2].Float64s()
	}
	l := int64(x.Shape[1])
	fl := l
	switch {
	case len(in) > 3 && in[3] != nil:
		if fl, err = refIntScalar(in[3], "frame_length"); err != nil {
			return nil, err
		}
		if window != nil && int64(len(window)) != fl {
			return nil, Badf("STFT window of %d for frame_length %d", len(window), fl)
		}
	case window != nil:
		fl = int64(len(window))
	}
	if step < 1 || fl < 1 || fl > l {
		return nil, Badf("STFT frame_step %d and frame_length %d over a signal of %d", step, fl, l)
	}
	frames, bins := (l-fl)/step+1, fl
	if attrs[graph.STFTAttrs](n).Onesided != 0 {
		bins = fl/2 + 1
	}
	if frames*fl > maxSignalLength*16 {
		return nil, Badf("STFT of %d frames of %d", frames, fl)
	}
	batch, parts := x.Shape[0], x.Shape[2]
	xv := x.Float64s()
	outShape := tensor.Shape{batch, int(frames), int(bins), 2}
	out := make([]float64, outShape.NumElements())
	for b := range batch {
		for f := range frames {
			for k := range bins {
				var re, im float64
				for t := range fl {
					w := 1.0
					if window != nil {
						w = window[t]
					}
					p := (b*int(l) + int(f*step+t)) * parts
					xr, xi := w*xv[p], 0.0
					if parts == 2 {
						xi = w * xv[p+1]
					}
					c, s := twiddle(k, t, fl, -1)
					re += xr*c - xi*s
					im += xr*s + xi*c
				}
				q := ((b*int(frames)+int(f))*int(bins) + int(k)) * 2
				out[q], out[q+1] = re, im
			}
		}
	}
	return one(tensor.FromFloat64s(x.DType, outShape, out)), nil
}

// melBins are MelWeightMatrix's num_mel_bins+2 triangle corners as spectrogram bins:
// the mel scale (2595·log10(1 + f/700)) from lower to upper edge in num_mel_bins+2
// equal steps of (upper−lower)/(num_mel_bins+2), back to hertz, then
// floor((dft_length+1)·f / sample_rate).
func melBins(mel, dft, rate int64, lower, upper float64) []int64 {
	toMel := func(f float64) float64 { return 2595 * math.Log10(1+f/700) }
	lo, hi := toMel(lower), toMel(upper)
	step := (hi - lo) / float64(mel+2)
	out := make([]int64, mel+2)
	for i := range out {
		hz := 700 * (math.Pow(10, (float64(i)*step+lo)/2595) - 1)
		out[i] = int64(math.Floor(float64(dft+1) * hz / float64(rate)))
	}
	return out
}

func signalMelWeightMatrix(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var iv [3]int64
	for i, what := range []string{"num_mel_bins", "dft_length", "sample_rate"} {
		v, err := refIntScalar(in[i], what)
		if err != nil {
			return nil, err
		}
		iv[i] = v
	}
	mel, dft, rate := iv[0], iv[1], iv[2]
	if in[3].Len() != 1 || in[4].Len() != 1 {
		return nil, Badf("lower_edge_hertz and upper_edge_hertz must be scalars")
	}
	lower, upper := in[3].Float64s()[0], in[4].Float64s()[0]
	rows := dft/2 + 1
	if mel < 1 || dft < 1 || rate < 1 || rows*mel > maxSignalLength*16 {
		return nil, Badf("MelWeightMatrix of %d mel bins, dft_length %d, sample_rate %d", mel, dft, rate)
	}
	bins := melBins(mel, dft, rate, lower, upper)
	for _, b := range bins {
		if b < 0 || b >= rows {
			return nil, Badf("MelWeightMatrix edges %g..%g Hz fall outside the %d spectrogram bins (bin %d)", lower, upper, rows, b)
		}
	}
	out := make([]float64, rows*mel)
	for i := range mel {
		left, center, right := bins[i], bins[i+1], bins[i+2]
		if center == left {
			out[center*mel+i] = 1
		} else {
			for j := left; j <= center; j++ {
				out[j*mel+i] = float64(j-left) / float64(center-left)
			}
		}
		for j := center; j < right; j++ {
			out[j*mel+i] = float64(right-j) / float64(right-center)
		}
	}
	dt := tensor.DType(attrs[graph.MelWeightMatrixAttrs](n).OutputDatatype)
	return one(tensor.FromFloat64s(dt, tensor.Shape{int(rows), int(mel)}, out)), nil
}
