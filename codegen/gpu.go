package codegen

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// gpuFunction prints f as one GPU kernel in the calling convention of the GPU devices
// (devices/cuda's doc): the buffers' pointers (inputs, then outputs), each runtime dim
// by value in PrimFunc.Dims order, then the status block (three int64 words: code and
// two details); with the dialect's ByteOffsets each buffer is two parameters, its
// buffer and the byte offset of the tensor in it; a texture parameter (loopir.ScopeTexture) is an image in the
// dialect's ImageForm, read-only unless the kernel writes it. Loops bound to thread axes print as the launch indices; the kernel is
// correct when launched with the geometry loopir/passes.DeriveLaunch gives for f.
func (e *cEmitter) gpuFunction(f *loopir.PrimFunc) error {
	e.f = f
	e.kernelName = e.ident(f, f.Name)
	if usesIndexCheck(f.Body) {
		e.oob = "kiln_status" // kiln_index claims the status block (gpuIndexHelper)
	}
	if e.opts.BoundsCheck {
		e.fail("bounds checks of a GPU kernel")
	}
	global := ""
	if e.d.GlobalQualifier != "" {
		global = e.d.GlobalQualifier + " "
	}
	images := e.imageParams(f)
	var params, offsets []string
	for _, p := range f.Params {
		if p.Scope == loopir.ScopeTexture {
			params = append(params, e.imageParam(p, images))
			continue
		}
		name := e.ident(p, p.Name)
		if e.d.ByteOffsets {
			params = append(params, fmt.Sprintf("%schar *kiln_base_%s, %s kiln_off_%s", global, name, e.ctype(tensor.Int64), name))
			offsets = append(offsets, fmt.Sprintf("  %s%s *%s%s = (%s%s *)(kiln_base_%s + kiln_off_%s);\n",
				global, e.ctype(p.DT), e.restrict(), name, global, e.ctype(p.DT), name, name))
			continue
		}
		params = append(params, fmt.Sprintf("%s%s *%s%s", global, e.ctype(p.DT), e.restrict(), name))
	}
	i64 := e.ctype(tensor.Int64)
	for _, d := range f.Dims {
		params = append(params, i64+" "+e.ident(d, d.Name))
		e.nonNeg[d] = true // extents
	}
	params = append(params, fmt.Sprintf("%s%s *kiln_status", global, i64))
	fmt.Fprintf(e.b, "\n%svoid %s(%s) {\n", e.qualifier(), e.kernelName, strings.Join(params, ", "))
	e.b.WriteString("  (void)kiln_status;\n")
	e.samplerDecl(images)
	e.sharedArrays(f.Body)
	for _, o := range offsets {
		e.b.WriteString(o)
	}
	e.stmt(f.Body, 1)
	e.b.WriteString("}\n")
	return e.err
}

// boundLoop prints a loop bound to a thread axis: its variable is the launch index.
func (e *cEmitter) boundLoop(s *loopir.For, a loopir.ThreadAxis, depth int) {
	if e.d.Parallel != LaunchGrid || e.d.ThreadIndex == nil {
		e.fail("%v loops", s.Kind)
		return
	}
	pad := strings.Repeat("  ", depth)
	v := e.ident(s.Var, s.Var.Name)
	i64 := e.ctype(tensor.Int64)
	idx := "(" + i64 + ")" + e.d.ThreadIndex(a)
	if c, ok := s.Min.(*loopir.IntImm); !ok || c.V != 0 {
		idx = e.expr(s.Min) + " + " + idx
	}
	fmt.Fprintf(e.b, "%s{\n%s  const %s %s = %s;\n", pad, pad, i64, v, idx)
	forget := e.inside(s)
	e.stmt(s.Body, depth+1)
	forget()
	fmt.Fprintf(e.b, "%s}\n", pad)
}

// localArray prints a local allocation of a GPU kernel as an array in the thread's
// private memory; its size must be a constant. A shared allocation was declared at
// kernel scope (sharedArrays): only its body prints here.
func (e *cEmitter) localArray(s *loopir.Allocate, depth int) {
	if s.Buf.Scope == loopir.ScopeShared {
		e.stmt(s.Body, depth)
		return
	}
	pad := strings.Repeat("  ", depth)
	n, ok := e.constElements(s.Buf)
	if !ok {
		e.fail("local buffer %s of a GPU kernel has no constant size", s.Buf.Name)
		return
	}
	fmt.Fprintf(e.b, "%s{\n%s  %s %s[%d];\n", pad, pad, e.ctype(s.Buf.DT), e.ident(s.Buf, s.Buf.Name), n)
	e.stmt(s.Body, depth+1)
	fmt.Fprintf(e.b, "%s}\n", pad)
}

// sharedArrays declares the kernel's shared buffers at kernel scope, where OpenCL C
// requires __local variables (and CUDA accepts __shared__ ones): one array per block,
// of constant size, in order of appearance.
func (e *cEmitter) sharedArrays(body loopir.Stmt) {
	loopir.MapStmt(body, func(x loopir.Expr) loopir.Expr { return x }, func(s loopir.Stmt) loopir.Stmt {
		a, ok := s.(*loopir.Allocate)
		if !ok || a.Buf.Scope != loopir.ScopeShared {
			return nil
		}
		if e.d.SharedQualifier == "" {
			e.fail("shared buffer %s", a.Buf.Name)
			return nil
		}
		n, ok := e.constElements(a.Buf)
		if !ok {
			e.fail("shared buffer %s has no constant size", a.Buf.Name)
			return nil
		}
		fmt.Fprintf(e.b, "  %s %s %s[%d];\n", e.d.SharedQualifier, e.ctype(a.Buf.DT), e.ident(a.Buf, a.Buf.Name), n)
		return nil
	})
}

// constElements is a buffer's element count when it is a positive constant.
func (e *cEmitter) constElements(b *loopir.Buffer) (int64, bool) {
	n, ok := loopir.NewAnalyzer(e.f.Dims).Simplify(b.Elements()).(*loopir.IntImm)
	if !ok || n.V < 1 {
		return 0, false
	}
	return n.V, true
}

// gpuIndexHelper is kiln_index for a GPU language: ONNX's wrap of a negative index,
// and for an index outside [-n, n) a clamped index, the failure claimed in the status
// block once (compare-and-swap of the code from 0: the first failing thread wins) with
// the index and n as its details. cas is the device's compare-and-swap of the code
// from 0 (CUDA: 64-bit atomicCAS; OpenCL: 32-bit atomic_cmpxchg on the code's first
// half, see devices/opencl), true when it swapped; pre opens the definition.
func gpuIndexHelper(pre, helper, global, cas string) string {
	return pre + fmt.Sprintf(`%[1]s i64 kiln_index(i64 v, i64 n, %[2]si64 *status) {
  i64 w = v < 0 ? v + n : v;
  if ((u64)w >= (u64)n) {
    if (%[3]s) { status[1] = v; status[2] = n; }
    return w < 0 || n <= 0 ? 0 : n - 1;
  }
  return w;
}
`, helper, global, fmt.Sprintf(cas, StatusIndexOutOfRange))
}
