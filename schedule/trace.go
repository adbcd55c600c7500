package schedule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/loopir"
)

// Instruction is one applied primitive: inputs are random-variable names, Str and Ints
// are its arguments and sampled decisions (tile sizes...), outputs are the new RVs.
type Instruction struct {
	Op   string
	In   []string
	Str  []string
	Ints []int64
	Out  []string
}

// Trace is the ordered list of applied primitives.
type Trace struct {
	Insts []Instruction
}

func (t *Trace) add(op string, in, str []string, ints []int64, out []string) {
	t.Insts = append(t.Insts, Instruction{Op: op, In: in, Str: str, Ints: ints, Out: out})
}

// String prints one instruction per line: `l1, l2 = split(l0, [-1, 8])`.
func (t *Trace) String() string {
	var b strings.Builder
	for _, in := range t.Insts {
		if len(in.Out) > 0 {
			b.WriteString(strings.Join(in.Out, ", ") + " = ")
		}
		args := append([]string{}, in.In...)
		for _, s := range in.Str {
			args = append(args, strconv.Quote(s))
		}
		if in.Ints != nil {
			parts := make([]string, len(in.Ints))
			for i, v := range in.Ints {
				parts[i] = strconv.FormatInt(v, 10)
			}
			args = append(args, "["+strings.Join(parts, ", ")+"]")
		}
		fmt.Fprintf(&b, "%s(%s)\n", in.Op, strings.Join(args, ", "))
	}
	return b.String()
}

// ParseTrace reads the String form.
func ParseTrace(text string) (*Trace, error) {
	t := &Trace{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		in := Instruction{}
		if lhs, rhs, ok := strings.Cut(line, " = "); ok {
			for _, o := range strings.Split(lhs, ",") {
				in.Out = append(in.Out, strings.TrimSpace(o))
			}
			line = rhs
		}
		op, rest, ok := strings.Cut(line, "(")
		if !ok || !strings.HasSuffix(rest, ")") {
			return nil, fmt.Errorf("%w: trace line %d: %q", ErrSchedule, n+1, line)
		}
		in.Op = op
		args := strings.TrimSuffix(rest, ")")
		if i := strings.LastIndex(args, "["); i >= 0 && strings.HasSuffix(strings.TrimSpace(args), "]") {
			list := strings.TrimSuffix(strings.TrimSpace(args[i+1:]), "]")
			in.Ints = []int64{}
			for _, p := range strings.Split(list, ",") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
				v, err := strconv.ParseInt(p, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: trace line %d: %v", ErrSchedule, n+1, err)
				}
				in.Ints = append(in.Ints, v)
			}
			args = strings.TrimSuffix(strings.TrimSpace(args[:i]), ",")
		}
		for rest := strings.TrimSpace(args); rest != ""; {
			if strings.HasPrefix(rest, `"`) {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					return nil, fmt.Errorf("%w: trace line %d: %v", ErrSchedule, n+1, err)
				}
				str, _ := strconv.Unquote(q)
				in.Str = append(in.Str, str)
				rest = strings.TrimSpace(rest[len(q):])
			} else {
				a, tail, _ := strings.Cut(rest, ",")
				in.In = append(in.In, strings.TrimSpace(a))
				rest = strings.TrimSpace(tail)
				continue
			}
			rest = strings.TrimSpace(strings.TrimPrefix(rest, ","))
		}
		t.Insts = append(t.Insts, in)
	}
	return t, nil
}

// Replay applies the trace to a fresh schedule of f; the result is identical to the
// schedule that recorded it. Tensor intrinsics named by tensorize instructions are looked
// up among intrins.
func (t *Trace) Replay(f *loopir.PrimFunc, intrins ...*loopir.TensorIntrin) (*Schedule, error) {
	s := New(f)
	rv := map[string]string{}
	mapIn := func(in []string) ([]string, error) {
		out := make([]string, len(in))
		for i, x := range in {
			m, ok := rv[x]
			if !ok {
				return nil, fmt.Errorf("%w: replay: %s is not defined", ErrSchedule, x)
			}
			out[i] = m
		}
		return out, nil
	}
	for _, inst := range t.Insts {
		in, err := mapIn(inst.In)
		if err != nil {
			return nil, err
		}
		var outs []string
		switch inst.Op {
		case "get_block":
			if len(inst.Str) != 1 {
				return nil, fmt.Errorf("%w: get_block takes one name", ErrSchedule)
			}
			b, err := s.GetBlock(inst.Str[0])
			if err != nil {
				return nil, err
			}
			outs = []string{string(b)}
		case "compute_inline":
			if len(in) != 1 {
				return nil, fmt.Errorf("%w: compute_inline takes a block", ErrSchedule)
			}
			if err := s.ComputeInline(BlockRV(in[0])); err != nil {
				return nil, err
			}
		case "decompose_reduction":
			if len(in) != 2 {
				return nil, fmt.Errorf("%w: decompose_reduction takes a block and a loop", ErrSchedule)
			}
			b, err := s.DecomposeReduction(BlockRV(in[0]), LoopRV(in[1]))
			if err != nil {
				return nil, err
			}
			outs = []string{string(b)}
		case "tensorize":
			if len(in) != 1 || len(inst.Str) != 1 {
				return nil, fmt.Errorf("%w: tensorize takes a loop and an intrinsic name", ErrSchedule)
			}
			var intrin *loopir.TensorIntrin
			for _, x := range intrins {
				if x.Name == inst.Str[0] {
					intrin = x
				}
			}
			if intrin == nil {
				return nil, fmt.Errorf("%w: replay: tensor intrinsic %q was not given", ErrSchedule, inst.Str[0])
			}
			if err := s.Tensorize(LoopRV(in[0]), intrin); err != nil {
				return nil, err
			}
		case "compute_at", "reverse_compute_at", "compact_at":
			if len(in) != 2 {
				return nil, fmt.Errorf("%w: %s takes a block and a loop", ErrSchedule, inst.Op)
			}
			apply := s.ComputeAt
			switch inst.Op {
			case "reverse_compute_at":
				apply = s.ReverseComputeAt
			case "compact_at":
				apply = s.CompactAt
			}
			if err := apply(BlockRV(in[0]), LoopRV(in[1])); err != nil {
				return nil, err
			}
		case "reverse_compute_inline":
			if len(in) != 1 {
				return nil, fmt.Errorf("%w: reverse_compute_inline takes a block", ErrSchedule)
			}
			if err := s.ReverseComputeInline(BlockRV(in[0])); err != nil {
				return nil, err
			}
		case "cache_read", "cache_write":
			if len(in) != 1 || len(inst.Str) != 1 || len(inst.Ints) != 1 {
				return nil, fmt.Errorf("%w: %s takes a block, a scope and an index", ErrSchedule, inst.Op)
			}
			apply := s.CacheRead
			if inst.Op == "cache_write" {
				apply = s.CacheWrite
			}
			b, err := apply(BlockRV(in[0]), int(inst.Ints[0]), inst.Str[0])
			if err != nil {
				return nil, err
			}
			outs = []string{string(b)}
		case "annotate":
			if len(in) != 1 || len(inst.Str) != 2 {
				return nil, fmt.Errorf("%w: annotate takes a loop, a key and a value", ErrSchedule)
			}
			if err := s.Annotate(LoopRV(in[0]), inst.Str[0], inst.Str[1]); err != nil {
				return nil, err
			}
		case "bind":
			if len(in) != 1 || len(inst.Str) != 1 {
				return nil, fmt.Errorf("%w: bind takes a loop and a thread axis", ErrSchedule)
			}
			axis, ok := loopir.ParseThreadAxis(inst.Str[0])
			if !ok {
				return nil, fmt.Errorf("%w: replay: %q is not a thread axis", ErrSchedule, inst.Str[0])
			}
			if err := s.Bind(LoopRV(in[0]), axis); err != nil {
				return nil, err
			}
		case "all_reduce":
			if len(in) != 2 || len(inst.Ints) != 1 {
				return nil, fmt.Errorf("%w: all_reduce takes a block, a loop and [threads]", ErrSchedule)
			}
			if err := s.AllReduce(BlockRV(in[0]), LoopRV(in[1]), inst.Ints[0]); err != nil {
				return nil, err
			}
		case "add_unit_loop":
			if len(in) != 1 {
				return nil, fmt.Errorf("%w: add_unit_loop takes a block", ErrSchedule)
			}
			l, err := s.AddUnitLoop(BlockRV(in[0]))
			if err != nil {
				return nil, err
			}
			outs = []string{string(l)}
		case "storage_align":
			if len(in) != 1 || len(inst.Ints) != 4 {
				return nil, fmt.Errorf("%w: storage_align takes a block and [write, axis, factor, offset]", ErrSchedule)
			}
			x := inst.Ints
			if err := s.StorageAlign(BlockRV(in[0]), int(x[0]), int(x[1]), x[2], x[3]); err != nil {
				return nil, err
			}
		case "get_loops", "split", "fuse", "reorder", "parallel", "vectorize", "unroll":
			if len(in) == 0 {
				return nil, fmt.Errorf("%w: %s needs an input", ErrSchedule, inst.Op)
			}
			ls, err := s.applyLoopInst(inst.Op, in, inst.Ints)
			if err != nil {
				return nil, err
			}
			outs = ls
		default:
			return nil, fmt.Errorf("%w: replay: unknown instruction %q", ErrSchedule, inst.Op)
		}
		if len(outs) != len(inst.Out) {
			return nil, fmt.Errorf("%w: replay: %s produced %d values, the trace has %d", ErrSchedule, inst.Op, len(outs), len(inst.Out))
		}
		for i, o := range inst.Out {
			rv[o] = outs[i]
		}
	}
	return s, nil
}

func (s *Schedule) applyLoopInst(op string, in []string, ints []int64) ([]string, error) {
	loops := make([]LoopRV, len(in))
	for i, x := range in {
		loops[i] = LoopRV(x)
	}
	var out []LoopRV
	var err error
	switch op {
	case "get_loops":
		out, err = s.GetLoops(BlockRV(in[0]))
	case "split":
		out, err = s.Split(loops[0], ints)
	case "fuse":
		var l LoopRV
		l, err = s.Fuse(loops...)
		out = []LoopRV{l}
	case "reorder":
		err = s.Reorder(loops...)
	case "parallel":
		err = s.Parallel(loops[0])
	case "vectorize":
		err = s.Vectorize(loops[0])
	case "unroll":
		err = s.Unroll(loops[0])
	}
	names := make([]string, len(out))
	for i, l := range out {
		names[i] = string(l)
	}
	return names, err
}
