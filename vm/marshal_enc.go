package vm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// MarshalBinary verifies the executable, then writes it in format FormatVersion: the header (see
// HeaderSize), the metadata payload (entry, functions, constants as element type, shape
// and the offset and length of their bytes in the data section, kernel table, binaries,
// builtins, the entry's input and output signature, the host call table
// (hostop_marshal.go); a kernel's launch geometry is a flag, then its six extents when
// set), zero padding to a DataAlign
// boundary, then the data section: each constant's raw little-endian bytes at the next
// DataAlign-aligned offset, zero padding between them, nothing after the last.
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
	raws, offs, dataLen, err := x.layoutConstants()
	if err != nil {
		return nil, err
	}
	p.uint(uint64(len(x.Constants)))
	for i, c := range x.Constants {
		p.uint(uint64(c.DType))
		p.uint(uint64(len(c.Shape)))
		for _, d := range c.Shape {
			p.int(int64(d))
		}
		p.uint(uint64(offs[i]))
		p.uint(uint64(len(raws[i])))
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
		p.uint(uint64(len(k.Args)))
		for _, a := range k.Args {
			p.uint(uint64(a.DType))
			p.extent(a.Elements)
		}
		if k.Launch == nil {
			p.uint(0)
		} else {
			p.uint(1)
			for _, e := range append(k.Launch.Grid[:], k.Launch.Block[:]...) {
				p.extent(e)
			}
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
	x.encodeHostCalls(&p)
	meta := p.b.Bytes()
	dataOff := alignUp(HeaderSize + int64(len(meta)))
	out := make([]byte, dataOff+dataLen)
	copy(out[HeaderSize:], meta)
	data := out[dataOff:]
	for i, raw := range raws {
		copy(data[offs[i]:], raw)
	}
	le := binary.LittleEndian
	copy(out, magic[:])
	le.PutUint32(out[8:], FormatVersion)
	le.PutUint32(out[12:], crc32.Checksum(meta, castagnoli))
	le.PutUint64(out[16:], uint64(len(meta)))
	le.PutUint64(out[24:], uint64(dataOff))
	le.PutUint64(out[32:], uint64(dataLen))
	le.PutUint32(out[40:], crc32.Checksum(data, castagnoli))
	return out, nil
}

// layoutConstants returns each constant's raw bytes (the tensor's own memory where it
// already is the raw encoding), its offset in the data section, and the section's length.
func (x *Executable) layoutConstants() (raws [][]byte, offs []int64, end int64, err error) {
	raws, offs = make([][]byte, len(x.Constants)), make([]int64, len(x.Constants))
	for i, c := range x.Constants {
		if c == nil {
			return nil, nil, 0, fmt.Errorf("%w: constant %d is nil", ErrFormat, i)
		}
		if err := c.Check(); err != nil {
			return nil, nil, 0, fmt.Errorf("%w: constant %d: %v", ErrFormat, i, err)
		}
		raw, ok := c.NativeBytes()
		if !ok {
			if raw, err = c.Raw(); err != nil {
				return nil, nil, 0, fmt.Errorf("constant %d: %w", i, err)
			}
		}
		raws[i], offs[i] = raw, alignUp(end)
		end = offs[i] + int64(len(raw))
	}
	return raws, offs, end, nil
}

type enc struct{ b bytes.Buffer }

func (e *enc) uint(v uint64) { e.b.Write(binary.AppendUvarint(nil, v)) }
func (e *enc) int(v int64)   { e.b.Write(binary.AppendVarint(nil, v)) }
func (e *enc) str(s string)  { e.uint(uint64(len(s))); e.b.WriteString(s) }
func (e *enc) bytes(p []byte) {
	e.uint(uint64(len(p)))
	e.b.Write(p)
}
func (e *enc) extent(x Extent) {
	e.uint(uint64(len(x)))
	for _, w := range x {
		e.int(w)
	}
}
func (e *enc) regs(rs []Reg) {
	e.uint(uint64(len(rs)))
	for _, r := range rs {
		e.int(int64(r))
	}
}
