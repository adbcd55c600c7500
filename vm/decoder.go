package vm

import (
	"encoding/binary"
	"fmt"
	"math"
)

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

// bytes reads a length-prefixed byte string into a copy.
func (d *dec) bytes() []byte {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%d bytes announced, %d left", n, len(d.b))
		return nil
	}
	out := append([]byte{}, d.b[:n]...)
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

// extent reads a length-prefixed extent program (checked later by Verify).
func (d *dec) extent() Extent {
	n := d.count("extent words")
	var out Extent
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.int())
	}
	return out
}
