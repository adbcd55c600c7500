package loopir

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Print renders a PrimFunc as text; schedule and pass tests compare these texts.
func Print(f *PrimFunc) string {
	var b strings.Builder
	params := make([]string, len(f.Params))
	for i, p := range f.Params {
		params[i] = bufDecl(p)
	}
	dims := make([]string, len(f.Dims))
	for i, d := range f.Dims {
		dims[i] = d.Name
	}
	attrs := ""
	if f.NoContract {
		attrs = " no_contract"
	}
	fmt.Fprintf(&b, "primfunc %s(%s) dims(%s)%s {\n", f.Name, strings.Join(params, ", "), strings.Join(dims, ", "), attrs)
	printStmt(&b, f.Body, 1)
	b.WriteString("}\n")
	return b.String()
}

func bufDecl(p *Buffer) string {
	if p.Scope == ScopeTexture {
		return fmt.Sprintf("%s: %v%s texture(%v)", p.Name, p.DT, exprList(p.Shape), p.Packing)
	}
	if p.Strides != nil {
		return fmt.Sprintf("%s: %v%s strides%s", p.Name, p.DT, exprList(p.Shape), exprList(p.Strides))
	}
	return fmt.Sprintf("%s: %v%s", p.Name, p.DT, exprList(p.Shape))
}

func exprList(es []Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = ExprString(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func printStmt(b *strings.Builder, s Stmt, depth int) {
	pad := strings.Repeat("  ", depth)
	switch s := s.(type) {
	case nil:
	case Seq:
		for _, x := range s {
			printStmt(b, x, depth)
		}
	case *For:
		kind := ""
		if s.Kind != Serial {
			kind = " " + s.Kind.String()
		}
		if len(s.Annotations) > 0 {
			keys := make([]string, 0, len(s.Annotations))
			for k := range s.Annotations {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				kind += fmt.Sprintf(" %s=%q", k, s.Annotations[k])
			}
		}
		fmt.Fprintf(b, "%sfor %s in [%s, %s)%s {\n", pad, s.Var.Name, ExprString(s.Min), ExprString(Bin(Add, s.Min, s.Extent)), kind)
		printStmt(b, s.Body, depth+1)
		fmt.Fprintf(b, "%s}\n", pad)
	case *Block:
		fmt.Fprintf(b, "%sblock %s {\n", pad, s.Name)
		for i, it := range s.Iters {
			kind := "S"
			if it.Kind == Reduction {
				kind = "R"
			}
			fmt.Fprintf(b, "%s  %s %s[%s] = %s\n", pad, kind, it.Var.Name, ExprString(it.Extent), ExprString(s.Bindings[i]))
		}
		if s.Predicate != nil {
			fmt.Fprintf(b, "%s  where %s\n", pad, ExprString(s.Predicate))
		}
		for _, r := range s.Reads {
			fmt.Fprintf(b, "%s  reads %s\n", pad, regionString(r))
		}
		for _, r := range s.Writes {
			fmt.Fprintf(b, "%s  writes %s\n", pad, regionString(r))
		}
		if s.Init != nil {
			fmt.Fprintf(b, "%s  init {\n", pad)
			printStmt(b, s.Init, depth+2)
			fmt.Fprintf(b, "%s  }\n", pad)
		}
		printStmt(b, s.Body, depth+1)
		fmt.Fprintf(b, "%s}\n", pad)
	case *Store:
		fmt.Fprintf(b, "%s%s%s = %s\n", pad, s.Buf.Name, exprList(s.Index), ExprString(s.Value))
	case *IfThenElse:
		fmt.Fprintf(b, "%sif %s {\n", pad, ExprString(s.Cond))
		printStmt(b, s.Then, depth+1)
		if s.Else != nil {
			fmt.Fprintf(b, "%s} else {\n", pad)
			printStmt(b, s.Else, depth+1)
		}
		fmt.Fprintf(b, "%s}\n", pad)
	case *Allocate:
		fmt.Fprintf(b, "%salloc %s %s {\n", pad, bufDecl(s.Buf), s.Buf.Scope)
		printStmt(b, s.Body, depth+1)
		fmt.Fprintf(b, "%s}\n", pad)
	case *Barrier:
		fmt.Fprintf(b, "%sbarrier\n", pad)
	case *TexWrite:
		fmt.Fprintf(b, "%stexwrite(%s, %s, %s) = %s\n", pad, s.Buf.Name, ExprString(s.X), ExprString(s.Y), exprList(s.Value[:]))
	case *IntrinCall:
		args := exprList(s.Args)
		fmt.Fprintf(b, "%scall %s(%s)\n", pad, s.Intrin.Name, args[1:len(args)-1])
	default:
		panic(fmt.Sprintf("BUG: printStmt: unknown statement %T", s))
	}
}

func regionString(r Region) string {
	parts := make([]string, len(r.Ranges))
	for i, rg := range r.Ranges {
		parts[i] = ExprString(rg[0]) + ":" + ExprString(Bin(Add, rg[0], rg[1]))
	}
	return r.Buf.Name + "[" + strings.Join(parts, ", ") + "]"
}

// ExprString renders an expression.
func ExprString(e Expr) string {
	switch e := e.(type) {
	case *Var:
		return e.Name
	case *IntImm:
		return strconv.FormatInt(e.V, 10)
	case *FloatImm:
		return strconv.FormatFloat(e.V, 'g', -1, 64) + "f"
	case *Binary:
		if e.Op == Min || e.Op == Max {
			return fmt.Sprintf("%v(%s, %s)", e.Op, ExprString(e.A), ExprString(e.B))
		}
		return "(" + ExprString(e.A) + " " + e.Op.String() + " " + ExprString(e.B) + ")"
	case *Not:
		return "!" + ExprString(e.X)
	case *Select:
		return fmt.Sprintf("select(%s, %s, %s)", ExprString(e.Cond), ExprString(e.T), ExprString(e.F))
	case *Cast:
		return fmt.Sprintf("%v(%s)", e.To, ExprString(e.X))
	case *Call:
		args := make([]string, len(e.Args))
		for i, a := range e.Args {
			args[i] = ExprString(a)
		}
		return e.Fn.String() + "(" + strings.Join(args, ", ") + ")"
	case *Load:
		return e.Buf.Name + exprList(e.Index)
	case *Address:
		return "&" + e.Buf.Name + exprList(e.Index)
	case *TexRead:
		return fmt.Sprintf("texread(%s, %s, %s)[%s]", e.Buf.Name, ExprString(e.X), ExprString(e.Y), ExprString(e.Lane))
	case *Reduce:
		axes := make([]string, len(e.Axes))
		for i, a := range e.Axes {
			axes[i] = a.Var.Name
		}
		return fmt.Sprintf("%v(%s, axes=[%s])", e.Comb, ExprString(e.Source), strings.Join(axes, ", "))
	}
	panic(fmt.Sprintf("BUG: ExprString: unknown expression %T", e))
}
