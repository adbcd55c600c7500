package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// NumPy .npy files (format versions 1.0, 2.0 and 3.0): a magic string, a version, a
// header length, a Python-dict header {'descr', 'fortran_order', 'shape'}, then the data in
// C order. Fortran order and object/string arrays are refused.

var npyMagic = []byte("\x93NUMPY")

var npyDescr = map[string]DType{
	"f2": Float16, "f4": Float32, "f8": Float64,
	"i1": Int8, "i2": Int16, "i4": Int32, "i8": Int64,
	"u1": Uint8, "u2": Uint16, "u4": Uint32, "u8": Uint64,
	"b1": Bool, "c8": Complex64, "c16": Complex128,
}

var (
	npyDescrRe = regexp.MustCompile(`'descr'\s*:\s*'([<>|=])([a-z]\d+)'`)
	npyOrderRe = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShapeRe = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// ReadNpy decodes a .npy file; limit bounds the data size in bytes (<= 0: no limit).
func ReadNpy(b []byte, limit int64) (*Tensor, error) {
	if len(b) < 10 || !bytes.Equal(b[:6], npyMagic) {
		return nil, fmt.Errorf("%w: not a .npy file", ErrShape)
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("%w: truncated .npy header", ErrShape)
		}
		h := binary.LittleEndian.Uint32(b[8:12])
		if int64(h) > int64(len(b)) {
			return nil, fmt.Errorf("%w: truncated .npy header", ErrShape)
		}
		hlen, off = int(h), 12
	default:
		return nil, fmt.Errorf("%w: .npy version %d.%d", ErrDType, b[6], b[7])
	}
	if off+hlen > len(b) {
		return nil, fmt.Errorf("%w: truncated .npy header", ErrShape)
	}
	hdr := string(b[off : off+hlen])
	data := b[off+hlen:]
	m := npyDescrRe.FindStringSubmatch(hdr)
	if m == nil {
		return nil, fmt.Errorf("%w: .npy header without a supported descr: %q", ErrDType, hdr)
	}
	dt, ok := npyDescr[m[2]]
	if !ok {
		return nil, fmt.Errorf("%w: .npy dtype %q", ErrDType, m[2])
	}
	if o := npyOrderRe.FindStringSubmatch(hdr); o == nil || o[1] == "True" {
		return nil, fmt.Errorf("%w: only C-order (fortran_order False) .npy files are supported", ErrShape)
	}
	sm := npyShapeRe.FindStringSubmatch(hdr)
	if sm == nil {
		return nil, fmt.Errorf("%w: .npy header without a shape", ErrShape)
	}
	var shape Shape
	for _, p := range strings.Split(sm[1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32*int64(256) {
			return nil, fmt.Errorf("%w: .npy extent %q", ErrShape, p)
		}
		shape = append(shape, int(n))
	}
	n, err := shape.CheckedNumElements(limit / int64(dt.Size()))
	if err != nil {
		return nil, err
	}
	need := n * int64(dt.Size())
	if int64(len(data)) < need {
		return nil, fmt.Errorf("%w: .npy holds %d data bytes, shape %v needs %d", ErrShape, len(data), shape, need)
	}
	raw := data[:need]
	if m[1] == ">" && dt.Size() > 1 {
		raw = swapBytes(raw, dt)
	}
	return FromRaw(dt, shape, raw)
}

func swapBytes(raw []byte, dt DType) []byte {
	out := make([]byte, len(raw))
	w := dt.Size()
	if dt == Complex64 || dt == Complex128 {
		w /= 2
	}
	for i := 0; i+w <= len(raw); i += w {
		for k := 0; k < w; k++ {
			out[i+k] = raw[i+w-1-k]
		}
	}
	return out
}

// WriteNpy encodes t as a version-1.0 .npy file.
func WriteNpy(w io.Writer, t *Tensor) error {
	descr := ""
	for d, dt := range npyDescr {
		if dt == t.DType {
			descr = d
		}
	}
	if descr == "" {
		return fmt.Errorf("%w: %v cannot be written as .npy", ErrDType, t.DType)
	}
	endian := "<"
	if t.DType.Size() == 1 {
		endian = "|"
	}
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s%s', 'fortran_order': False, 'shape': (%s), }", endian, descr, shape)
	total := 10 + len(hdr) + 1
	hdr += strings.Repeat(" ", (64-total%64)%64) + "\n"
	raw, err := t.Raw()
	if err != nil {
		return err
	}
	var head [10]byte
	copy(head[:], npyMagic)
	head[6], head[7] = 1, 0
	binary.LittleEndian.PutUint16(head[8:], uint16(len(hdr)))
	for _, chunk := range [][]byte{head[:], []byte(hdr), raw} {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}
