package vm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

var (
	// ErrFormat: the bytes are not a well-formed kiln executable (foreign file, torn
	// write, corrupted payload, inconsistent references).
	ErrFormat = errors.New("not a valid kiln executable")
	// ErrVersion: a kiln executable of another format version (a cache miss, not damage).
	ErrVersion = errors.New("kiln executable of another format version")
)

// FormatVersion is bumped whenever the encoding or the meaning of an opcode changes.
const FormatVersion = 2

var magic = [8]byte{'K', 'I', 'L', 'N', 'E', 'X', 'E', 0}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const headerSize = 8 + 4 + 4 + 8

// MarshalBinary verifies the executable, then writes magic, format version, the CRC-32C
// and length of the payload, then the payload: entry, functions, constants, kernel
// table, binaries, builtins, the entry's input and output signature.
func (x *Executable) MarshalBinary() ([]byte, error) {
	if err := x.Verify(); err != nil {
		return nil, err
	}
	return x.encode()
}

func (x *Executable) encode() ([]byte, error) {
	var p enc
	p.uint(uint64(x.Entry))
	p.uint(uint64(len(x.Functions)))
	for _, f := range x.Functions {
		p.str(f.Name)
		p.uint(uint64(f.Params))
		p.uint(uint64(f.Regs))
		p.uint(uint64(len(f.Code)))
		for _, in := range f.Code {
			p.b.WriteByte(byte(in.Op))
			p.int(int64(in.Dst))
			p.regs(in.Args)
			p.regs(in.Dims)
			p.uint(uint64(in.In))
			p.int(in.Imm)
			p.uint(uint64(in.DType))
			p.uint(uint64(len(in.Shape)))
			for _, d := range in.Shape {
				p.int(d)
			}
			p.uint(uint64(in.Device))
			p.str(in.Str)
		}
	}
	p.uint(uint64(len(x.Constants)))
	for i, c := range x.Constants {
		raw, err := c.Raw()
		if err != nil {
			return nil, fmt.Errorf("constant %d: %w", i, err)
		}
		p.uint(uint64(c.DType))
		p.uint(uint64(len(c.Shape)))
		for _, d := range c.Shape {
			p.int(int64(d))
		}
		p.bytes(raw)
	}
	p.uint(uint64(len(x.Kernels)))
	for _, k := range x.Kernels {
		p.str(k.Name)
		p.uint(uint64(k.Binary))
		p.uint(uint64(k.Inputs))
		p.uint(uint64(k.Outputs))
		p.uint(uint64(len(k.Dims)))
		for _, d := range k.Dims {
			p.str(d)
		}
	}
	p.uint(uint64(len(x.Binaries)))
	for _, b := range x.Binaries {
		p.str(b.Device)
		p.str(b.Fingerprint)
		p.bytes(b.Data)
	}
	p.uint(uint64(len(x.Builtins)))
	for _, s := range x.Builtins {
		p.str(s)
	}
	for _, sig := range [][]IOInfo{x.Inputs, x.Outputs} {
		p.uint(uint64(len(sig)))
		for _, io := range sig {
			p.str(io.Name)
			p.uint(uint64(io.DType))
			p.uint(uint64(len(io.Shape)))
			for _, d := range io.Shape {
				p.int(d)
			}
		}
	}
	payload := p.b.Bytes()
	out := make([]byte, headerSize, headerSize+len(payload))
	copy(out, magic[:])
	binary.LittleEndian.PutUint32(out[8:], FormatVersion)
	binary.LittleEndian.PutUint32(out[12:], crc32.Checksum(payload, castagnoli))
	binary.LittleEndian.PutUint64(out[16:], uint64(len(payload)))
	return append(out, payload...), nil
}

// UnmarshalBinary decodes an executable and verifies it; on error x is unchanged.
func (x *Executable) UnmarshalBinary(data []byte) error {
	if len(data) < headerSize || !bytes.Equal(data[:8], magic[:]) {
		return fmt.Errorf("%w: no kiln executable header", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != FormatVersion {
		return fmt.Errorf("%w: format %d, this kiln reads %d", ErrVersion, v, FormatVersion)
	}
	sum, n := binary.LittleEndian.Uint32(data[12:]), binary.LittleEndian.Uint64(data[16:])
	payload := data[headerSize:]
	if uint64(len(payload)) != n {
		return fmt.Errorf("%w: payload is %d bytes, the header says %d (truncated or padded)", ErrFormat, len(payload), n)
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrFormat)
	}
	d := &dec{b: payload}
	var y Executable
	y.Entry = d.count("entry")
	nf := d.count("functions")
	for i := 0; i < nf && d.err == nil; i++ {
		f := Function{Name: d.str(), Params: d.count("parameters"), Regs: d.count("registers")}
		nc := d.count("instructions")
		for j := 0; j < nc && d.err == nil; j++ {
			in := Instr{Op: Opcode(d.byte()), Dst: Reg(d.int32()), Args: d.regs(), Dims: d.regs(), In: d.count("inputs"), Imm: d.int()}
			dt := d.count("dtype")
			in.DType = tensor.DType(dt)
			rank := d.count("rank")
			for k := 0; k < rank && d.err == nil; k++ {
				in.Shape = append(in.Shape, d.int())
			}
			in.Device = d.count("device")
			in.Str = d.str()
			f.Code = append(f.Code, in)
		}
		y.Functions = append(y.Functions, f)
	}
	nconst := d.count("constants")
	for i := 0; i < nconst && d.err == nil; i++ {
		dt := tensor.DType(d.count("dtype"))
		rank := d.count("rank")
		shape := make(tensor.Shape, 0, rank)
		for k := 0; k < rank && d.err == nil; k++ {
			v := d.int()
			if v < 0 || v > math.MaxInt32 {
				d.fail("constant %d: extent %d", i, v)
			}
			shape = append(shape, int(v))
		}
		raw := d.view()
		if d.err != nil {
			break
		}
		if !dt.Valid() {
			d.fail("constant %d: element type %d", i, dt)
			break
		}
		if n, err := shape.CheckedNumElements(int64(len(raw))); err != nil || n*int64(dt.Size()) != int64(len(raw)) {
			d.fail("constant %d: %d bytes do not hold a %v%v", i, len(raw), dt, shape)
			break
		}
		c, err := tensor.FromRaw(dt, shape, raw)
		if err != nil {
			d.fail("constant %d: %v", i, err)
			break
		}
		y.Constants = append(y.Constants, c)
	}
	nk := d.count("kernels")
	for i := 0; i < nk && d.err == nil; i++ {
		k := KernelInfo{Name: d.str(), Binary: d.count("binary"), Inputs: d.count("inputs"), Outputs: d.count("outputs")}
		nd := d.count("dims")
		for j := 0; j < nd && d.err == nil; j++ {
			k.Dims = append(k.Dims, d.str())
		}
		y.Kernels = append(y.Kernels, k)
	}
	nb := d.count("binaries")
	for i := 0; i < nb && d.err == nil; i++ {
		y.Binaries = append(y.Binaries, Binary{Device: d.str(), Fingerprint: d.str(), Data: d.bytes()})
	}
	nbi := d.count("builtins")
	for i := 0; i < nbi && d.err == nil; i++ {
		y.Builtins = append(y.Builtins, d.str())
	}
	for _, sig := range []*[]IOInfo{&y.Inputs, &y.Outputs} {
		n := d.count("signature entries")
		for i := 0; i < n && d.err == nil; i++ {
			io := IOInfo{Name: d.str(), DType: tensor.DType(d.count("dtype"))}
			rank := d.count("rank")
			for k := 0; k < rank && d.err == nil; k++ {
				io.Shape = append(io.Shape, d.int())
			}
			*sig = append(*sig, io)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the last section", len(d.b))
	}
	if d.err != nil {
		return d.err
	}
	if err := y.Verify(); err != nil {
		return err
	}
	*x = y
	return nil
}

type enc struct{ b bytes.Buffer }

func (e *enc) uint(v uint64) { e.b.Write(binary.AppendUvarint(nil, v)) }
func (e *enc) int(v int64)   { e.b.Write(binary.AppendVarint(nil, v)) }
func (e *enc) str(s string)  { e.uint(uint64(len(s))); e.b.WriteString(s) }
func (e *enc) bytes(p []byte) {
	e.uint(uint64(len(p)))
	e.b.Write(p)
}
func (e *enc) regs(rs []Reg) {
	e.uint(uint64(len(rs)))
	for _, r := range rs {
		e.int(int64(r))
	}
}

// dec reads the payload; the first failure sticks and later reads return zero values.
// Counts are bounded by the bytes left, so a corrupted count cannot make it allocate
// more than the input describes.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *dec) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int32() int32 {
	v := d.int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("register %d out of range", v)
		return 0
	}
	return int32(v)
}

// count reads a non-negative size that cannot exceed the bytes left.
func (d *dec) count(what string) int {
	v := d.uint()
	if v > uint64(len(d.b)) && v > 1<<16 || v > math.MaxInt32 {
		d.fail("%s count %d exceeds the data", what, v)
		return 0
	}
	return int(v)
}

func (d *dec) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) bytes() []byte {
	v := d.view()
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// view is bytes without the copy: the result aliases the input.
func (d *dec) view() []byte {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%d bytes announced, %d left", n, len(d.b))
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *dec) str() string { return string(d.bytes()) }

func (d *dec) regs() []Reg {
	n := d.count("registers")
	var out []Reg
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, Reg(d.int32()))
	}
	return out
}
