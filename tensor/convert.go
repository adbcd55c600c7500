package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/x448/float16"
)

// F16ToF32 converts half bits to float32.
func F16ToF32(h Float16Bits) float32 { return float16.Frombits(uint16(h)).Float32() }

// F32ToF16 converts float32 to half bits, rounding to nearest even.
func F32ToF16(f float32) Float16Bits { return Float16Bits(float16.Fromfloat32(f).Bits()) }

// BF16ToF32 converts bfloat16 bits to float32.
func BF16ToF32(b BFloat16Bits) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 converts float32 to bfloat16 bits, rounding to nearest even (NaN stays NaN).
func F32ToBF16(f float32) BFloat16Bits {
	u := math.Float32bits(f)
	if f != f {
		return BFloat16Bits(u>>16 | 0x40)
	}
	u += 0x7fff + (u>>16)&1
	return BFloat16Bits(u >> 16)
}

// Float64s returns the elements converted to float64 (bool → 0/1). Strings are parsed.
func (t *Tensor) Float64s() []float64 {
	switch d := t.Data.(type) {
	case []float64:
		return append([]float64(nil), d...)
	case []float32:
		return conv(d, func(v float32) float64 { return float64(v) })
	case []Float16Bits:
		return conv(d, func(v Float16Bits) float64 { return float64(F16ToF32(v)) })
	case []BFloat16Bits:
		return conv(d, func(v BFloat16Bits) float64 { return float64(BF16ToF32(v)) })
	case []int8:
		return conv(d, func(v int8) float64 { return float64(v) })
	case []int16:
		return conv(d, func(v int16) float64 { return float64(v) })
	case []int32:
		return conv(d, func(v int32) float64 { return float64(v) })
	case []int64:
		return conv(d, func(v int64) float64 { return float64(v) })
	case []uint8:
		return conv(d, func(v uint8) float64 { return float64(v) })
	case []uint16:
		return conv(d, func(v uint16) float64 { return float64(v) })
	case []uint32:
		return conv(d, func(v uint32) float64 { return float64(v) })
	case []uint64:
		return conv(d, func(v uint64) float64 { return float64(v) })
	case []bool:
		return conv(d, func(v bool) float64 { return b2f(v) })
	case []string:
		return conv(d, func(v string) float64 { f, _ := strconv.ParseFloat(v, 64); return f })
	}
	panic(fmt.Sprintf("BUG: Float64s on %T", t.Data))
}

// Int64s returns the elements converted to int64 (floats truncate toward zero).
func (t *Tensor) Int64s() []int64 {
	switch d := t.Data.(type) {
	case []int64:
		return append([]int64(nil), d...)
	case []int32:
		return conv(d, func(v int32) int64 { return int64(v) })
	case []int16:
		return conv(d, func(v int16) int64 { return int64(v) })
	case []int8:
		return conv(d, func(v int8) int64 { return int64(v) })
	case []uint8:
		return conv(d, func(v uint8) int64 { return int64(v) })
	case []uint16:
		return conv(d, func(v uint16) int64 { return int64(v) })
	case []uint32:
		return conv(d, func(v uint32) int64 { return int64(v) })
	case []uint64:
		return conv(d, func(v uint64) int64 { return int64(v) })
	case []bool:
		return conv(d, func(v bool) int64 { return int64(b2f(v)) })
	}
	return conv(t.Float64s(), f2i)
}

// FromFloat64s builds a tensor of dtype dt from float64 values, converting with ONNX Cast
// semantics (float → int truncates toward zero; → bool is v != 0).
func FromFloat64s(dt DType, shape Shape, v []float64) *Tensor {
	var data any
	switch dt {
	case Float64:
		data = v
	case Float32:
		data = conv(v, func(x float64) float32 { return float32(x) })
	case Float16:
		data = conv(v, func(x float64) Float16Bits { return F32ToF16(float32(x)) })
	case BFloat16:
		data = conv(v, func(x float64) BFloat16Bits { return F32ToBF16(float32(x)) })
	case Bool:
		data = conv(v, func(x float64) bool { return x != 0 })
	case String:
		data = conv(v, func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) })
	default:
		if dt.IsUnsigned() {
			return FromInt64s(dt, shape, conv(v, func(x float64) int64 {
				if x >= 9223372036854775808.0 {
					return int64(uint64(x))
				}
				return f2i(x)
			}))
		}
		return FromInt64s(dt, shape, conv(v, f2i))
	}
	return MustFromSlice(shape, data)
}

// FromInt64s builds a tensor of dtype dt from int64 values (integers wrap like C casts).
func FromInt64s(dt DType, shape Shape, v []int64) *Tensor {
	var data any
	switch dt {
	case Int64:
		data = v
	case Int32:
		data = conv(v, func(x int64) int32 { return int32(x) })
	case Int16:
		data = conv(v, func(x int64) int16 { return int16(x) })
	case Int8:
		data = conv(v, func(x int64) int8 { return int8(x) })
	case Uint8:
		data = conv(v, func(x int64) uint8 { return uint8(x) })
	case Uint16:
		data = conv(v, func(x int64) uint16 { return uint16(x) })
	case Uint32:
		data = conv(v, func(x int64) uint32 { return uint32(x) })
	case Uint64:
		data = conv(v, func(x int64) uint64 { return uint64(x) })
	case Bool:
		data = conv(v, func(x int64) bool { return x != 0 })
	case String:
		data = conv(v, func(x int64) string { return strconv.FormatInt(x, 10) })
	default:
		return FromFloat64s(dt, shape, conv(v, func(x int64) float64 { return float64(x) }))
	}
	return MustFromSlice(shape, data)
}

// Cast converts t to dtype dt with ONNX Cast semantics.
func (t *Tensor) Cast(dt DType) *Tensor {
	if t.DType == dt {
		return t.Clone()
	}
	switch {
	case t.DType == String && dt != String:
		vals := make([]float64, 0, t.Len())
		for _, s := range t.Data.([]string) {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				switch s {
				case "INF", "+INF", "inf", "+inf", "Infinity", "+Infinity":
					f = math.Inf(1)
				case "-INF", "-inf", "-Infinity":
					f = math.Inf(-1)
				default:
					f = math.NaN()
				}
			}
			vals = append(vals, f)
		}
		return FromFloat64s(dt, t.Shape, vals)
	case dt == String && t.DType.IsFloat():
		f := t.Float64s()
		bits := 64
		if t.DType != Float64 {
			bits = 32
		}
		return MustFromSlice(t.Shape, conv(f, func(x float64) string {
			switch {
			case math.IsInf(x, 1):
				return "INF"
			case math.IsInf(x, -1):
				return "-INF"
			case math.IsNaN(x):
				return "NaN"
			}
			return strconv.FormatFloat(x, 'g', -1, bits)
		}))
	case t.DType.IsFloat():
		return FromFloat64s(dt, t.Shape, t.Float64s())
	default:
		return FromInt64s(dt, t.Shape, t.Int64s())
	}
}

// FromRaw decodes little-endian raw bytes (TensorProto.raw_data) into a tensor.
func FromRaw(dt DType, shape Shape, raw []byte) (*Tensor, error) {
	size := dt.Size()
	if size == 0 || !dt.Valid() {
		return nil, fmt.Errorf("%w: %v has no raw encoding", ErrDType, dt)
	}
	n := shape.NumElements()
	if len(raw) != n*size {
		return nil, fmt.Errorf("%w: %d raw bytes for %v%v (want %d)", ErrShape, len(raw), dt, shape, n*size)
	}
	t := New(dt, shape)
	if b, ok := t.NativeBytes(); ok {
		copy(b, raw)
		return t, nil
	}
	le := binary.LittleEndian
	switch d := t.Data.(type) {
	case []float32:
		for i := range d {
			d[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case []float64:
		for i := range d {
			d[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
	case []Float16Bits:
		for i := range d {
			d[i] = Float16Bits(le.Uint16(raw[2*i:]))
		}
	case []BFloat16Bits:
		for i := range d {
			d[i] = BFloat16Bits(le.Uint16(raw[2*i:]))
		}
	case []int8:
		for i := range d {
			d[i] = int8(raw[i])
		}
	case []uint8:
		copy(d, raw)
	case []bool:
		for i := range d {
			d[i] = raw[i] != 0
		}
	case []int16:
		for i := range d {
			d[i] = int16(le.Uint16(raw[2*i:]))
		}
	case []uint16:
		for i := range d {
			d[i] = le.Uint16(raw[2*i:])
		}
	case []int32:
		for i := range d {
			d[i] = int32(le.Uint32(raw[4*i:]))
		}
	case []uint32:
		for i := range d {
			d[i] = le.Uint32(raw[4*i:])
		}
	case []int64:
		for i := range d {
			d[i] = int64(le.Uint64(raw[8*i:]))
		}
	case []uint64:
		for i := range d {
			d[i] = le.Uint64(raw[8*i:])
		}
	case []complex64:
		for i := range d {
			d[i] = complex(math.Float32frombits(le.Uint32(raw[8*i:])), math.Float32frombits(le.Uint32(raw[8*i+4:])))
		}
	case []complex128:
		for i := range d {
			d[i] = complex(math.Float64frombits(le.Uint64(raw[16*i:])), math.Float64frombits(le.Uint64(raw[16*i+8:])))
		}
	default:
		return nil, fmt.Errorf("%w: %v has no raw encoding", ErrDType, dt)
	}
	return t, nil
}

// Raw encodes the tensor as little-endian bytes (not defined for strings).
func (t *Tensor) Raw() ([]byte, error) {
	size := t.DType.Size()
	if size == 0 {
		return nil, fmt.Errorf("%w: %v has no raw encoding", ErrDType, t.DType)
	}
	out := make([]byte, t.Len()*size)
	if b, ok := t.NativeBytes(); ok {
		copy(out, b)
		return out, nil
	}
	le := binary.LittleEndian
	switch d := t.Data.(type) {
	case []float32:
		for i, v := range d {
			le.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case []float64:
		for i, v := range d {
			le.PutUint64(out[8*i:], math.Float64bits(v))
		}
	case []Float16Bits:
		for i, v := range d {
			le.PutUint16(out[2*i:], uint16(v))
		}
	case []BFloat16Bits:
		for i, v := range d {
			le.PutUint16(out[2*i:], uint16(v))
		}
	case []int8:
		for i, v := range d {
			out[i] = byte(v)
		}
	case []uint8:
		copy(out, d)
	case []bool:
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
	case []int16:
		for i, v := range d {
			le.PutUint16(out[2*i:], uint16(v))
		}
	case []uint16:
		for i, v := range d {
			le.PutUint16(out[2*i:], v)
		}
	case []int32:
		for i, v := range d {
			le.PutUint32(out[4*i:], uint32(v))
		}
	case []uint32:
		for i, v := range d {
			le.PutUint32(out[4*i:], v)
		}
	case []int64:
		for i, v := range d {
			le.PutUint64(out[8*i:], uint64(v))
		}
	case []uint64:
		for i, v := range d {
			le.PutUint64(out[8*i:], v)
		}
	case []complex64:
		for i, v := range d {
			le.PutUint32(out[8*i:], math.Float32bits(real(v)))
			le.PutUint32(out[8*i+4:], math.Float32bits(imag(v)))
		}
	case []complex128:
		for i, v := range d {
			le.PutUint64(out[16*i:], math.Float64bits(real(v)))
			le.PutUint64(out[16*i+8:], math.Float64bits(imag(v)))
		}
	default:
		panic(fmt.Sprintf("BUG: Raw on %T", t.Data))
	}
	return out, nil
}

func conv[A, B any](in []A, f func(A) B) []B {
	out := make([]B, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// f2i truncates toward zero, saturating NaN/overflow like common hardware (to MinInt64).
func f2i(x float64) int64 {
	if x != x || x >= 9.223372036854775807e18 || x < -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(x)
}
