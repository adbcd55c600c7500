package vm

import (
	"fmt"
	"hash/crc32"
	"math"

	"github.com/kilnrt/kiln/tensor"
)

// Decode decodes an executable whose encoding is split at its data section: meta is
// b[:off] and data is b[off:] for off = DataOffset(b), possibly in different memory
// (meta read from a compressed store, data mapped from a file). Both checksums are
// verified, then the executable.
//
// Constants alias data instead of copying it where the memory allows (a little-endian
// host, a dtype other than bool and string, an address aligned for the element type;
// see tensor.FromNative); the rest are copied, and Mapped reports whether any alias.
// Aliased constants must not be written (data may be read-only) and are valid while the
// executable is reachable: the executable keeps backing (for instance the object whose
// cleanup unmaps data) reachable for its own lifetime, and the caller must keep data
// valid and unchanged until then. meta is not retained.
func Decode(meta, data []byte, backing any) (*Executable, error) {
	var x Executable
	if err := x.decode(meta, data, true); err != nil {
		return nil, err
	}
	x.backing = backing
	return &x, nil
}

// UnmarshalBinary decodes a whole encoding (MarshalBinary's output) and verifies it; the
// executable owns copies of everything and does not retain b. On error x is unchanged.
func (x *Executable) UnmarshalBinary(b []byte) error {
	h, err := parseHeader(b)
	if err != nil {
		return err
	}
	if int64(len(b)) < h.dataOff {
		return fmt.Errorf("%w: %d bytes, the data section starts at %d (truncated)", ErrFormat, len(b), h.dataOff)
	}
	return x.decode(b[:h.dataOff], b[h.dataOff:], false)
}

// decode fills x from meta and data (aliasing data where it can, if alias); on error x
// is unchanged.
func (x *Executable) decode(meta, data []byte, alias bool) error {
	h, err := parseHeader(meta)
	if err != nil {
		return err
	}
	if int64(len(meta)) != h.dataOff {
		return fmt.Errorf("%w: metadata is %d bytes, the header says %d (truncated or padded)", ErrFormat, len(meta), h.dataOff)
	}
	if int64(len(data)) != h.dataLen {
		return fmt.Errorf("%w: data section is %d bytes, the header says %d (truncated or padded)", ErrFormat, len(data), h.dataLen)
	}
	payload := meta[HeaderSize:h.metaEnd]
	if crc32.Checksum(payload, castagnoli) != h.metaSum {
		return fmt.Errorf("%w: metadata checksum mismatch", ErrFormat)
	}
	if !zero(meta[h.metaEnd:]) {
		return fmt.Errorf("%w: nonzero padding after the metadata", ErrFormat)
	}
	if crc32.Checksum(data, castagnoli) != h.dataSum {
		return fmt.Errorf("%w: data section checksum mismatch", ErrFormat)
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
	y.decodeConstants(d, data, alias)
	nk := d.count("kernels")
	for i := 0; i < nk && d.err == nil; i++ {
		k := KernelInfo{Name: d.str(), Binary: d.count("binary"), Inputs: d.count("inputs"), Outputs: d.count("outputs")}
		nd := d.count("dims")
		for j := 0; j < nd && d.err == nil; j++ {
			k.Dims = append(k.Dims, d.str())
		}
		na := d.count("kernel arguments")
		for j := 0; j < na && d.err == nil; j++ {
			k.Args = append(k.Args, KernelArg{DType: tensor.DType(d.count("dtype")), Elements: d.extent()})
		}
		switch flag := d.count("launch flag"); {
		case flag == 1:
			k.Launch = &KernelLaunch{}
			for j := range 3 {
				k.Launch.Grid[j] = d.extent()
			}
			for j := range 3 {
				k.Launch.Block[j] = d.extent()
			}
		case flag != 0:
			d.fail("kernel %d: launch flag %d", i, flag)
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
	y.decodeHostCalls(d)
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

// decodeConstants reads the constant table and takes each constant's bytes from data.
// The layout must be the one MarshalBinary writes (each constant at the first
// DataAlign-aligned offset after the previous one, zero bytes between, none after the
// last), so ranges never overlap and a decoded executable re-encodes to the same bytes.
func (y *Executable) decodeConstants(d *dec, data []byte, alias bool) {
	n := d.count("constants")
	end := int64(0)
	for i := 0; i < n && d.err == nil; i++ {
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
		off, size := d.uint(), d.uint()
		if d.err != nil {
			return
		}
		if want := alignUp(end); want > int64(len(data)) || off != uint64(want) || size > uint64(len(data))-off {
			d.fail("constant %d: bytes [%d, +%d) where [%d, +%d) within %d bytes was expected", i, off, size, want, size, len(data))
			return
		}
		if !zero(data[end:off]) {
			d.fail("constant %d: nonzero padding before it", i)
			return
		}
		raw := data[off : off+size : off+size]
		end = int64(off + size)
		if !dt.Valid() || dt.Size() == 0 {
			d.fail("constant %d: element type %d", i, dt)
			return
		}
		if ne, err := shape.CheckedNumElements(math.MaxInt64); err != nil || ne != int64(size)/int64(dt.Size()) || size%uint64(dt.Size()) != 0 {
			d.fail("constant %d: %d bytes do not hold a %v%v", i, size, dt, shape)
			return
		}
		if dt == tensor.Bool && !bools(raw) {
			d.fail("constant %d: a bool byte other than 0 or 1", i)
			return
		}
		if alias {
			if c, ok := tensor.FromNative(dt, shape, raw); ok {
				y.Constants = append(y.Constants, c)
				y.mapped = true
				continue
			}
		}
		c, err := tensor.FromRaw(dt, shape, raw)
		if err != nil {
			d.fail("constant %d: %v", i, err)
			return
		}
		y.Constants = append(y.Constants, c)
	}
	if d.err == nil && end != int64(len(data)) {
		d.fail("%d bytes after the last constant", int64(len(data))-end)
	}
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func bools(b []byte) bool {
	for _, c := range b {
		if c > 1 {
			return false
		}
	}
	return true
}
