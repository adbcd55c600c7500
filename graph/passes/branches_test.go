package passes_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph/passes"
)

// TestStubBranchesCases: before/after text of stub-branches: a branch whose Reshape
// does not type for the bound shapes becomes a kiln.Fail typed as the other branch's
// result, and the If takes that static type; an inner If whose branches both fail
// makes its enclosing branch the one stubbed; branches that type stay.
func TestStubBranchesCases(t *testing.T) {
	runTable(t, passes.Pipeline{pass(t, "stub-branches")}, passes.Context{}, stubCases)
}

var stubCases = []textCase{
	{"the else branch reshapes 4 elements to 3x3: it fails at run time, the If is f32[2,2]",
		`func @main(%x: f32[4], %c: bool[]) {
  const %s22: i64[2] = [2, 2]
  const %s33: i64[2] = [3, 3]
  %r = If(%c) : f32[a,b]
    then_branch =
      func @then_branch() {
        %y = Reshape(%x, %s22) : f32[2,2]
        return %y
      }
    else_branch =
      func @else_branch() {
        %z = Reshape(%x, %s33) : f32[3,3]
        return %z
      }
  %o = Relu(%r) : f32[a,b]
  return %o
}`, `func @main(%x: f32[4], %c: bool[]) {
  const %s22: i64[2] = [2, 2]
  const %s33: i64[2] = [3, 3]
  %r = If(%c) : f32[2,2]
    then_branch =
      func @then_branch() {
        %y = Reshape(%x, %s22) : f32[2,2]
        return %y
      }
    else_branch =
      func @else_branch() {
        %else_branch_fail0 = Fail() {message="branch else_branch of If cannot run on these input shapes: type inference failed: Reshape: cannot reshape [4] (4 elements) to [3 3] (9 elements)", type=f32[2,2]} : f32[2,2]
        return %else_branch_fail0
      }
  %o = Relu(%r) : f32[2,2]
  return %o
}`},
	{"an inner If whose two branches fail: the outer branch holding it is stubbed",
		`func @main(%x: f32[4], %c: bool[], %d: bool[]) {
  const %s22: i64[2] = [2, 2]
  const %s33: i64[2] = [3, 3]
  const %s5: i64[1] = [5]
  %r = If(%c) name="outer" : f32[a,b]
    then_branch =
      func @then_branch() {
        %i = If(%d) name="inner" : f32[p,q]
          then_branch =
            func @inner_then() {
              %u = Reshape(%x, %s33) : f32[3,3]
              return %u
            }
          else_branch =
            func @inner_else() {
              %v = Reshape(%x, %s5) : f32[5]
              return %v
            }
        return %i
      }
    else_branch =
      func @else_branch() {
        %z = Reshape(%x, %s22) : f32[2,2]
        return %z
      }
  return %r
}`, `func @main(%x: f32[4], %c: bool[], %d: bool[]) {
  const %s22: i64[2] = [2, 2]
  const %s33: i64[2] = [3, 3]
  const %s5: i64[1] = [5]
  %r = If(%c) name="outer" : f32[2,2]
    then_branch =
      func @then_branch() {
        %then_branch_fail0 = Fail() {message="branch then_branch of If \"outer\" cannot run on these input shapes: neither branch of If \"inner\" can run on these input shapes: then_branch: type inference failed: Reshape: cannot reshape [4] (4 elements) to [3 3] (9 elements); else_branch: type inference failed: Reshape: cannot reshape [4] (4 elements) to [5] (5 elements)", type=f32[2,2]} : f32[2,2]
        return %then_branch_fail0
      }
    else_branch =
      func @else_branch() {
        %z = Reshape(%x, %s22) : f32[2,2]
        return %z
      }
  return %r
}`},
	{"branches that type stay as they are",
		`func @main(%x: f32[4], %c: bool[]) {
  const %s22: i64[2] = [2, 2]
  %r = If(%c) : f32[a]
    then_branch =
      func @then_branch() {
        %y = Relu(%x) : f32[4]
        return %y
      }
    else_branch =
      func @else_branch() {
        return %x
      }
  return %r
}`, `func @main(%x: f32[4], %c: bool[]) {
  const %s22: i64[2] = [2, 2]
  %r = If(%c) : f32[4]
    then_branch =
      func @then_branch() {
        %y = Relu(%x) : f32[4]
        return %y
      }
    else_branch =
      func @else_branch() {
        return %x
      }
  return %r
}`},
}
