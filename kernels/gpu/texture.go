package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/tensor"
)

// ErrNotTexture: a definition or parameter the texture schedules do not take (not a
// 5-D float32 tensor in blocks of 4 lanes), refused rather than lowered wrongly.
var ErrNotTexture = errors.New("not a texture kernel")

// ScheduleTextureInjective is the injective rule over textures: every stage inlined
// into the output, which is a 5-D tensor whose last axis is a texel's four lanes
// ([N, C/4, H, W, 4]); its first four loops are fused into one loop over its texels,
// split by block and bound to blockIdx.x and threadIdx.x, and the lane loop stays
// innermost in the thread, so one thread writes one whole texel (the texture flatten
// pass of loopir/passes turns it into one texel write). A tail leaves a predicate, as
// in ScheduleInjective. Refused: what ScheduleInjective refuses (ErrNotInjective), and
// an output that is not 5-D with a lane axis of 4 (ErrNotTexture).
func ScheduleTextureInjective(s *schedule.Schedule, block int64) error {
	if block < 1 {
		return fmt.Errorf("BUG: ScheduleTextureInjective: block size %d", block)
	}
	loops, err := injectiveLoops(s)
	if err != nil {
		return err
	}
	if len(loops) != 5 {
		return fmt.Errorf("%w: an output of rank %d, not 5", ErrNotTexture, len(loops))
	}
	if e, ok := s.Extent(loops[4]); !ok || e != loopir.TexelLanes {
		return fmt.Errorf("%w: an innermost axis that is not the %d lanes of a texel", ErrNotTexture, loopir.TexelLanes)
	}
	fused, err := s.Fuse(loops[:4]...)
	if err != nil {
		return err
	}
	if e, ok := s.Extent(fused); ok && e < block {
		block = max(e, 1)
	}
	parts, err := s.Split(fused, []int64{-1, block})
	if err != nil {
		return err
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		return err
	}
	return s.Bind(parts[1], loopir.ThreadIdxX)
}

// Texturize is f with the parameters at the keys of packings held in textures of those
// packings (loopir.ScopeTexture): new parameter buffers, every access of the old ones
// rewritten to the new. A parameter that cannot be a texture (not float32, not 5-D
// with a lane axis of 4, strided) is ErrNotTexture naming it.
func Texturize(f *loopir.PrimFunc, packings map[int]loopir.Packing) (*loopir.PrimFunc, error) {
	swap := map[*loopir.Buffer]*loopir.Buffer{}
	params := append([]*loopir.Buffer(nil), f.Params...)
	for i, p := range packings {
		if i < 0 || i >= len(params) {
			return nil, fmt.Errorf("BUG: Texturize: %s has no parameter %d", f.Name, i)
		}
		b := params[i]
		lanes, ok := 0, len(b.Shape) == 5
		if ok {
			c, isConst := b.Shape[4].(*loopir.IntImm)
			ok = isConst && c.V == loopir.TexelLanes
			lanes = loopir.TexelLanes
		}
		if !ok || b.DT != tensor.Float32 || b.Strides != nil {
			return nil, fmt.Errorf("%w: kernel %s: parameter %s (%v of rank %d, lanes %d) cannot be a texture", ErrNotTexture, f.Name, b.Name, b.DT, len(b.Shape), lanes)
		}
		nb := *b
		nb.Scope, nb.Packing = loopir.ScopeTexture, p
		params[i] = &nb
		swap[b] = &nb
	}
	buf := func(b *loopir.Buffer) *loopir.Buffer {
		if r, ok := swap[b]; ok {
			return r
		}
		return b
	}
	regions := func(rs []loopir.Region) []loopir.Region {
		out := make([]loopir.Region, len(rs))
		for i, r := range rs {
			out[i] = loopir.Region{Buf: buf(r.Buf), Ranges: r.Ranges}
		}
		return out
	}
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr {
		switch e := e.(type) {
		case *loopir.Load:
			return &loopir.Load{Buf: buf(e.Buf), Index: e.Index}
		case *loopir.Address:
			return &loopir.Address{Buf: buf(e.Buf), Index: e.Index}
		}
		return e
	}, func(s loopir.Stmt) loopir.Stmt {
		switch s := s.(type) {
		case *loopir.Store:
			return &loopir.Store{Buf: buf(s.Buf), Index: s.Index, Value: s.Value}
		case *loopir.Block:
			nb := *s
			nb.Reads, nb.Writes = regions(s.Reads), regions(s.Writes)
			return &nb
		}
		return nil
	})
	return &loopir.PrimFunc{Name: f.Name, Params: params, Dims: f.Dims, Body: body}, nil
}
