package passes_test

import "github.com/kilnrt/kiln/graph/passes"

const fuseHeader = `module opsets(""=17)` + "\n"

var fuseCases = []struct {
	name          string
	before, after string
	lim           passes.FuseLimits
}{
	{"conv absorbs bias, relu and the residual add", `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %b: f32[4,1,1], %r: f32[1,4,8,8]) {
  %c = Conv(%x, %w) : f32[1,4,8,8]
  %a = Add(%c, %b) : f32[1,4,8,8]
  %s = Add(%a, %r) : f32[1,4,8,8]
  %y = Relu(%s) : f32[1,4,8,8]
  return %y
}`, `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %b: f32[4,1,1], %r: f32[1,4,8,8]) {
  %y = Fused(%x, %w, %b, %r) {anchor="Conv"} : f32[1,4,8,8]
    body =
      func @fused_conv_add_add_relu(%p0: f32[1,4,8,8], %p1: f32[4,4,1,1], %p2: f32[4,1,1], %p3: f32[1,4,8,8]) {
        %c = Conv(%p0, %p1) : f32[1,4,8,8]
        %a = Add(%c, %p2) : f32[1,4,8,8]
        %s = Add(%a, %p3) : f32[1,4,8,8]
        %y = Relu(%s) : f32[1,4,8,8]
        return %y
      }
  return %y
}`, passes.FuseLimits{}},
	{"not fused: a conv whose output is also a result", `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1]) {
  %c = Conv(%x, %w) : f32[1,4,8,8]
  %y = Relu(%c) : f32[1,4,8,8]
  return %c, %y
}`, `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1]) {
  %c = Conv(%x, %w) : f32[1,4,8,8]
  %y = Relu(%c) : f32[1,4,8,8]
  return %c, %y
}`, passes.FuseLimits{}},
	{"not fused: an elementwise producer into a conv", `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1]) {
  %a = Relu(%x) : f32[1,4,8,8]
  %c = Conv(%a, %w) : f32[1,4,8,8]
  return %c
}`, `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1]) {
  %a = Relu(%x) : f32[1,4,8,8]
  %c = Conv(%a, %w) : f32[1,4,8,8]
  return %c
}`, passes.FuseLimits{}},
	{"not fused: conv and matmul take no injective consumer", `func @main(%x: f32[4,8], %w: f32[8,8]) {
  %m = MatMul(%x, %w) : f32[4,8]
  %t = Transpose(%m) {perm=[1,0]} : f32[8,4]
  return %t
}`, `func @main(%x: f32[4,8], %w: f32[8,8]) {
  %m = MatMul(%x, %w) : f32[4,8]
  %t = Transpose(%m) {perm=[1,0]} : f32[8,4]
  return %t
}`, passes.FuseLimits{}},
	{"two convs meet in one add: the first takes it", `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %v: f32[4,4,1,1]) {
  %c = Conv(%x, %w) : f32[1,4,8,8]
  %d = Conv(%x, %v) : f32[1,4,8,8]
  %s = Add(%c, %d) : f32[1,4,8,8]
  return %s
}`, `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %v: f32[4,4,1,1]) {
  %d = Conv(%x, %v) : f32[1,4,8,8]
  %s = Fused(%x, %w, %d) {anchor="Conv"} : f32[1,4,8,8]
    body =
      func @fused_conv_add(%p0: f32[1,4,8,8], %p1: f32[4,4,1,1], %p2: f32[1,4,8,8]) {
        %c = Conv(%p0, %p1) : f32[1,4,8,8]
        %s = Add(%c, %p2) : f32[1,4,8,8]
        return %s
      }
  return %s
}`, passes.FuseLimits{}},
	{"a producer fuses into a reduction, the reduction does not fuse onward", `func @main(%x: f32[4,8]) {
  const %ax: i64[1] = [1]
  %e = Exp(%x) : f32[4,8]
  %s = ReduceSum(%e, %ax) : f32[4,1]
  %y = Sqrt(%s) : f32[4,1]
  return %y
}`, `func @main(%x: f32[4,8]) {
  %s = Fused(%x) {anchor="Exp"} : f32[4,1]
    body =
      func @fused_exp_reducesum(%p0: f32[4,8]) {
        const %ax: i64[1] = [1]
        %e = Exp(%p0) : f32[4,8]
        %s = ReduceSum(%e, %ax) : f32[4,1]
        return %s
      }
  %y = Sqrt(%s) : f32[4,1]
  return %y
}`, passes.FuseLimits{}},
	{"a diamond of elementwise ops is one group", `func @main(%x: f32[4,8]) {
  %r = Relu(%x) : f32[4,8]
  %a = Exp(%r) : f32[4,8]
  %b = Neg(%r) : f32[4,8]
  %s = Add(%a, %b) : f32[4,8]
  return %s
}`, `func @main(%x: f32[4,8]) {
  %s = Fused(%x) {anchor="Relu"} : f32[4,8]
    body =
      func @fused_relu_exp_neg_add(%p0: f32[4,8]) {
        %r = Relu(%p0) : f32[4,8]
        %a = Exp(%r) : f32[4,8]
        %b = Neg(%r) : f32[4,8]
        %s = Add(%a, %b) : f32[4,8]
        return %s
      }
  return %s
}`, passes.FuseLimits{}},
	{"injective chains fuse in phase 1", `func @main(%x: f32[4,8]) {
  %t = Transpose(%x) {perm=[1,0]} : f32[8,4]
  %r = Relu(%t) : f32[8,4]
  %u = Transpose(%r) {perm=[1,0]} : f32[4,8]
  return %u
}`, `func @main(%x: f32[4,8]) {
  %u = Fused(%x) {anchor="Transpose"} : f32[4,8]
    body =
      func @fused_transpose_relu_transpose(%p0: f32[4,8]) {
        %t = Transpose(%p0) {perm=[1,0]} : f32[8,4]
        %r = Relu(%t) : f32[8,4]
        %u = Transpose(%r) {perm=[1,0]} : f32[4,8]
        return %u
      }
  return %u
}`, passes.FuseLimits{}},
	{"a side operand joins the conv's epilogue", `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %r: f32[1,4,8,8]) {
  %c = Conv(%x, %w) : f32[1,4,8,8]
  %n = Neg(%r) : f32[1,4,8,8]
  %s = Add(%c, %n) : f32[1,4,8,8]
  return %s
}`, `func @main(%x: f32[1,4,8,8], %w: f32[4,4,1,1], %r: f32[1,4,8,8]) {
  %s = Fused(%x, %w, %r) {anchor="Conv"} : f32[1,4,8,8]
    body =
      func @fused_conv_neg_add(%p0: f32[1,4,8,8], %p1: f32[4,4,1,1], %p2: f32[1,4,8,8]) {
        %c = Conv(%p0, %p1) : f32[1,4,8,8]
        %n = Neg(%p2) : f32[1,4,8,8]
        %s = Add(%c, %n) : f32[1,4,8,8]
        return %s
      }
  return %s
}`, passes.FuseLimits{}},
	{"the op limit splits a chain", `func @main(%x: f32[4,8]) {
  %a = Relu(%x) : f32[4,8]
  %b = Exp(%a) : f32[4,8]
  %c = Neg(%b) : f32[4,8]
  return %c
}`, `func @main(%x: f32[4,8]) {
  %b = Fused(%x) {anchor="Relu"} : f32[4,8]
    body =
      func @fused_relu_exp(%p0: f32[4,8]) {
        %a = Relu(%p0) : f32[4,8]
        %b = Exp(%a) : f32[4,8]
        return %b
      }
  %c = Neg(%b) : f32[4,8]
  return %c
}`, passes.FuseLimits{MaxOps: 2}},
	{"the argument limit keeps a third input out", `func @main(%x: f32[4,8], %y: f32[4,8], %z: f32[4,8]) {
  %a = Add(%x, %y) : f32[4,8]
  %b = Mul(%a, %z) : f32[4,8]
  return %b
}`, `func @main(%x: f32[4,8], %y: f32[4,8], %z: f32[4,8]) {
  %a = Add(%x, %y) : f32[4,8]
  %b = Mul(%a, %z) : f32[4,8]
  return %b
}`, passes.FuseLimits{MaxArgs: 3}},
	{"not fused across control flow: If is opaque, its branches fuse inside", `func @main(%x: f32[4], %c: bool[]) {
  %r = Relu(%x) : f32[4]
  %y = If(%c) : f32[4]
    then_branch =
    func @then() {
      %e = Exp(%r) : f32[4]
      %n = Neg(%e) : f32[4]
      return %n
    }
    else_branch =
    func @else() {
      return %r
    }
  %z = Abs(%y) : f32[4]
  return %z
}`, `func @main(%x: f32[4], %c: bool[]) {
  %r = Relu(%x) : f32[4]
  %y = If(%c) : f32[4]
    then_branch =
      func @then() {
        %n = Fused(%r) {anchor="Exp"} : f32[4]
          body =
            func @fused_exp_neg(%p0: f32[4]) {
              %e = Exp(%p0) : f32[4]
              %n = Neg(%e) : f32[4]
              return %n
            }
        return %n
      }
    else_branch =
      func @else() {
        return %r
      }
  %z = Abs(%y) : f32[4]
  return %z
}`, passes.FuseLimits{}},
}
