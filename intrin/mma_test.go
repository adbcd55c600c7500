package intrin

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/target"
)

// roundTF32 rounds x to TF32 as cvt.rna.tf32.f32 does: to nearest, ties away from zero,
// keeping 10 explicit mantissa bits (infinities and NaN kept).
func roundTF32(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 {
		return x
	}
	return math.Float32frombits((b + 0x1000) &^ 0x1fff)
}

// The m16n8k8 TF32 fragment layout of the PTX ISA ("Matrix Fragments for mma.m16n8k8",
// .tf32): lane = g·4 + t holds A's registers 0–3 at (g + 8·(r%2), t + 4·(r/2)), B's
// registers 0–1 at (k t + 4·r, column g), and C's registers 0–3 at (g + 8·(r/2),
// 2·t + r%2).
func fragA(g, t, r int) (row, k int)   { return g + 8*(r%2), t + 4*(r/2) }
func fragB(g, t, r int) (k, col int)   { return t + 4*r, g }
func fragC(g, t, r int) (row, col int) { return g + 8*(r/2), 2*t + r%2 }

// warpTiles is one warp's call of the intrinsic: the A tile (rows × bk, row pitch
// aPitch), the B tile (bk × cols, row pitch bPitch) and each lane's accumulators, with
// the per-lane extents the schedule passes (rows and columns past the product's edge)
// and the call's k extent.
type warpTiles struct {
	m                    MMA
	a, b                 []float32
	aPitch, bPitch       int
	c                    [32][]float32 // per lane, rm × rn
	kk                   int
	validRows, validCols int // of the warp's tile
}

func (w *warpTiles) lanesExtent(g, t int) (m, n int) {
	rm, rn := int(w.m.RM), int(w.m.RN)
	return min(rm, w.validRows-g*rm), min(rn, w.validCols-t*rn)
}

// emulate runs the intrinsic's algorithm (mmaCUDA's, statement for statement) for
// the 32 lanes of a warp, each mma.sync executed with the PTX fragment layout above.
func (w *warpTiles) emulate() {
	rm, rn := int(w.m.RM), int(w.m.RN)
	mt, nt := rm/2, rn/2
	acc := make([][][][4]float32, 32)
	for lane := range 32 {
		g, t := lane>>2, lane&3
		m, n := w.lanesExtent(g, t)
		acc[lane] = make([][][4]float32, mt)
		for x := range mt {
			acc[lane][x] = make([][4]float32, nt)
			for y := range nt {
				for h := range 4 {
					i, j := 2*x+h>>1, 2*y+h&1
					if i < m && j < n {
						acc[lane][x][y][h] = w.c[lane][i*rn+j]
					}
				}
			}
		}
	}
	// a lane's A pointer is its first row; its B pointer its first column
	aAt := func(g, row, k int) float32 { return w.a[(g*rm+row)*w.aPitch+k] }
	for k0 := 0; k0 < int(w.m.BK) && k0 < w.kk; k0 += 8 {
		fa := make([][][4]float32, 32)
		fb := make([][][2]float32, 32)
		for lane := range 32 {
			g, t := lane>>2, lane&3
			k1, k2 := k0+t, k0+t+4
			ld := func(ok bool, v func() float32) float32 {
				if !ok {
					return 0
				}
				return roundTF32(v())
			}
			fa[lane] = make([][4]float32, mt)
			for x := range mt {
				fa[lane][x] = [4]float32{
					ld(k1 < w.kk, func() float32 { return aAt(g, 2*x, k1) }),
					ld(k1 < w.kk, func() float32 { return aAt(g, 2*x+1, k1) }),
					ld(k2 < w.kk, func() float32 { return aAt(g, 2*x, k2) }),
					ld(k2 < w.kk, func() float32 { return aAt(g, 2*x+1, k2) }),
				}
			}
			// bw = b + ((g>>1) - t)·RN + (g&1), from the lane's own column t·RN
			bw := t*rn + ((g>>1)-t)*rn + g&1
			fb[lane] = make([][2]float32, nt)
			for y := range nt {
				fb[lane][y] = [2]float32{
					ld(k1 < w.kk, func() float32 { return w.b[k1*w.bPitch+bw+2*y] }),
					ld(k2 < w.kk, func() float32 { return w.b[k2*w.bPitch+bw+2*y] }),
				}
			}
		}
		for x := range mt {
			for y := range nt {
				var A [16][8]float32
				var B [8][8]float32
				var C [16][8]float32
				for lane := range 32 {
					g, t := lane>>2, lane&3
					for r := range 4 {
						row, k := fragA(g, t, r)
						A[row][k] = fa[lane][x][r]
						row, col := fragC(g, t, r)
						C[row][col] = acc[lane][x][y][r]
					}
					for r := range 2 {
						k, col := fragB(g, t, r)
						B[k][col] = fb[lane][y][r]
					}
				}
				for lane := range 32 {
					g, t := lane>>2, lane&3
					for r := range 4 {
						row, col := fragC(g, t, r)
						s := float64(C[row][col])
						for k := range 8 {
							s += float64(A[row][k]) * float64(B[k][col])
						}
						acc[lane][x][y][r] = float32(s)
					}
				}
			}
		}
	}
	for lane := range 32 {
		g, t := lane>>2, lane&3
		m, n := w.lanesExtent(g, t)
		for x := range mt {
			for y := range nt {
				for h := range 4 {
					i, j := 2*x+h>>1, 2*y+h&1
					if i < m && j < n {
						w.c[lane][i*rn+j] = acc[lane][x][y][h]
					}
				}
			}
		}
	}
}

// TestMMAFragmentLayoutComputesTheTF32Product: a warp's call, emulated lane by lane
// with the PTX fragment layout, leaves in each lane's register tile (rows g·RM…, columns
// t·RN… of the warp's tile) the product of the TF32-rounded tiles plus the previous
// accumulators, within 1e-5 of Σ|a·b|; the tiles past the k extent, the valid rows
// and the valid columns hold NaN and are never used, and accumulators past a lane's
// extents are never written.
func TestMMAFragmentLayoutComputesTheTF32Product(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		kk, validRows, validCols int
	}{{"whole", 16, 32, 32}, {"tails", 10, 27, 21}, {"k_past_half_a_step", 13, 32, 32}, {"one_k_step", 3, 32, 32}, {"one_lane_row", 16, 3, 32}} {
		m := MMATF32(4, 8, 16)
		rm, rn, bk := int(m.RM), int(m.RN), int(m.BK)
		rows, cols := MMARowGroups*rm, MMAColGroups*rn
		rng := rand.New(rand.NewPCG(uint64(tc.kk), 7))
		w := &warpTiles{m: m, aPitch: bk + 3, bPitch: cols + 5, kk: tc.kk, validRows: tc.validRows, validCols: tc.validCols}
		w.a = make([]float32, rows*w.aPitch)
		w.b = make([]float32, bk*w.bPitch)
		nan := float32(math.NaN())
		for i := range w.a {
			w.a[i] = nan
		}
		for i := range w.b {
			w.b[i] = nan
		}
		for i := range tc.validRows {
			for k := range tc.kk {
				w.a[i*w.aPitch+k] = float32(rng.NormFloat64())
			}
		}
		for k := range tc.kk {
			for j := range tc.validCols {
				w.b[k*w.bPitch+j] = float32(rng.NormFloat64())
			}
		}
		const sentinel = 12345
		prev := make([]float32, rows*cols)
		for lane := range 32 {
			w.c[lane] = make([]float32, rm*rn)
			g, tt := lane>>2, lane&3
			for i := range rm {
				for j := range rn {
					v := float32(rng.NormFloat64())
					prev[(g*rm+i)*cols+tt*rn+j] = v
					w.c[lane][i*rn+j] = v
					if g*rm+i >= tc.validRows || tt*rn+j >= tc.validCols {
						w.c[lane][i*rn+j] = sentinel
					}
				}
			}
		}
		w.emulate()
		for lane := range 32 {
			g, tt := lane>>2, lane&3
			for i := range rm {
				for j := range rn {
					row, col := g*rm+i, tt*rn+j
					got := w.c[lane][i*rn+j]
					if row >= tc.validRows || col >= tc.validCols {
						if got != sentinel {
							t.Fatalf("%s: lane %d wrote (%d, %d) past its extents: %g", tc.name, lane, row, col, got)
						}
						continue
					}
					want, scale := float64(prev[row*cols+col]), math.Abs(float64(prev[row*cols+col]))
					for k := range tc.kk {
						p := float64(roundTF32(w.a[row*w.aPitch+k])) * float64(roundTF32(w.b[k*w.bPitch+col]))
						want += p
						scale += math.Abs(p)
					}
					if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > 1e-5*scale {
						t.Fatalf("%s: lane %d, element (%d, %d): %g, want %g", tc.name, lane, row, col, got, want)
					}
				}
			}
		}
	}
}

// TestMMASourceAddressesAsTheEmulation: the printed implementation holds the
// addressing the emulation runs (B from the warp's column origin, the fragments of the
// lane's own rows, the TF32 rounding and the instruction).
func TestMMASourceAddressesAsTheEmulation(t *testing.T) {
	src := MMATF32(4, 8, 16).Intrin.Impl["cuda"]
	for _, want := range []string{
		"const float *bw = b + ((i64)((g >> 1) - t) * 8 + (g & 1)) * b_sj;",
		"fa[x][1] = kiln_tf32(k1 < kk ? a[(2 * x + 1) * a_si + k1 * a_sk] : 0.0f);",
		"fa[x][2] = kiln_tf32(k2 < kk ? a[(2 * x) * a_si + k2 * a_sk] : 0.0f);",
		"fb[y][1] = kiln_tf32(k2 < kk ? bw[k2 * b_sk + (2 * y) * b_sj] : 0.0f);",
		"const i64 i = 2 * x + (h >> 1), j = 2 * y + (h & 1);",
		"cvt.rna.tf32.f32",
		"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("the implementation lacks %q:\n%s", want, src)
		}
	}
}

func TestMMASupportsSM80AndLaterCUDAOnly(t *testing.T) {
	m := MMATF32(4, 8, 16)
	for arch, want := range map[string]bool{"sm_75": false, "sm_80": true, "sm_86": true, "sm_90a": true, "sm_100": true, "sm_61": false} {
		if got := m.Supports(target.Target{Kind: target.CUDA, Arch: arch}); got != want {
			t.Errorf("%s: Supports = %v, want %v", arch, got, want)
		}
	}
	if m.Supports(target.Target{Kind: target.OpenCL, Arch: "sm_90"}) {
		t.Error("an OpenCL target supports mma")
	}
}
