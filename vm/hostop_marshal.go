package vm

import "math"

// The host call table's encoding, the metadata payload's last section: the count, then
// per call its op name, its attributes (count; per attribute the name, the kind, the
// value count and the values: varints, IEEE-754 bits as uvarints, or strings) and its
// slots (count, then each as a uvarint).

func (x *Executable) encodeHostCalls(p *enc) {
	p.uint(uint64(len(x.HostCalls)))
	for _, hc := range x.HostCalls {
		p.str(hc.Op)
		p.uint(uint64(len(hc.Attrs)))
		for _, at := range hc.Attrs {
			p.str(at.Name)
			p.uint(uint64(at.Kind))
			switch at.Kind {
			case AttrInts:
				p.uint(uint64(len(at.Ints)))
				for _, v := range at.Ints {
					p.int(v)
				}
			case AttrFloats:
				p.uint(uint64(len(at.Floats)))
				for _, v := range at.Floats {
					p.uint(math.Float64bits(v))
				}
			default: // AttrStrings (Verify refused any other kind)
				p.uint(uint64(len(at.Strings)))
				for _, v := range at.Strings {
					p.str(v)
				}
			}
		}
		p.uint(uint64(len(hc.Slots)))
		for _, s := range hc.Slots {
			p.uint(uint64(s))
		}
	}
}

func (y *Executable) decodeHostCalls(d *dec) {
	n := d.count("host calls")
	for i := 0; i < n && d.err == nil; i++ {
		hc := HostCall{Op: d.str()}
		na := d.count("host call attributes")
		for j := 0; j < na && d.err == nil; j++ {
			at := HostAttr{Name: d.str(), Kind: AttrKind(d.count("attribute kind"))}
			nv := d.count("attribute values")
			for k := 0; k < nv && d.err == nil; k++ {
				switch at.Kind {
				case AttrInts:
					at.Ints = append(at.Ints, d.int())
				case AttrFloats:
					at.Floats = append(at.Floats, math.Float64frombits(d.uint()))
				case AttrStrings:
					at.Strings = append(at.Strings, d.str())
				default:
					d.fail("host call %d: attribute %q has kind %d", i, at.Name, at.Kind)
				}
			}
			hc.Attrs = append(hc.Attrs, at)
		}
		ns := d.count("host call slots")
		for j := 0; j < ns && d.err == nil; j++ {
			s := d.uint()
			if s >= maxHostSlots {
				d.fail("host call %d: slot %d", i, s)
			}
			hc.Slots = append(hc.Slots, int(s))
		}
		y.HostCalls = append(y.HostCalls, hc)
	}
}
