package serve

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// Upper bounds of a model's free dims. When the configuration bounds every free dim of
// every input — the batch axis by max_batch_size, a dim config.pbtxt fixes, a model
// symbol named in the parameter max_dims ("seq=512,batch=8") — the generic executable's
// memory pool is sized for the bounds once it is built: one inference on zeros at the
// bound shapes grows the pool to the largest footprint any request can need, and later
// requests (smaller shapes) are carved from those blocks by the best-fit pool instead of
// allocating as shapes grow. Without bounds the pool grows on demand.

// maxDimsParam is the model configuration parameter that bounds model symbols.
const maxDimsParam = "max_dims"

// parseMaxDims reads "sym=N,sym=N" (N ≥ 1).
func parseMaxDims(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if !ok || strings.TrimSpace(name) == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("parameter %s: %q is not symbol=N with N ≥ 1", maxDimsParam, kv)
		}
		out[strings.TrimSpace(name)] = n
	}
	return out, nil
}

// checkMaxDims validates the max_dims parameter against the model's symbols.
func checkMaxDims(c *modelpb.ModelConfig, it *onnx.Interface) error {
	p, ok := c.Parameters[maxDimsParam]
	if !ok {
		return nil
	}
	bounds, err := parseMaxDims(p.StringValue)
	if err != nil {
		return err
	}
	var syms []string
	for _, in := range it.Inputs {
		for _, d := range in.Type.Shape {
			syms = append(syms, d.Symbols()...)
		}
	}
	for name := range bounds {
		if !slices.Contains(syms, name) {
			return fmt.Errorf("parameter %s bounds %q, which is not a dim of the model's inputs (symbols: %v)", maxDimsParam, name, syms)
		}
	}
	return nil
}

// boundShapes returns every input's shape with each free dim at its upper bound; ok is
// false when some free dim has none.
func (m *model) boundShapes() (map[string][]int64, bool) {
	var maxDims map[string]int64
	if p, ok := m.config.Parameters[maxDimsParam]; ok {
		maxDims, _ = parseMaxDims(p.StringValue) // validated when the model loaded
	}
	batching := m.config.MaxBatchSize > 0
	shapes := map[string][]int64{}
	for _, p := range m.iface.Inputs {
		if p.Type.UnknownRank {
			return nil, false
		}
		var cfg *modelpb.ModelInput
		if i := slices.IndexFunc(m.config.Input, func(in *modelpb.ModelInput) bool { return in.Name == p.Name }); i >= 0 {
			cfg = m.config.Input[i]
		}
		shape := make([]int64, len(p.Type.Shape))
		for k, d := range p.Type.Shape {
			if v, ok := d.Value(); ok {
				shape[k] = v
				continue
			}
			b := int64(-1)
			if name, ok := d.IsSym(); ok {
				if v, ok := maxDims[name]; ok {
					b = v
				}
			}
			switch c := k - 1; {
			case batching && k == 0:
				if b < 0 || int64(m.config.MaxBatchSize) < b {
					b = int64(m.config.MaxBatchSize)
				}
			case !batching && cfg != nil && k < len(cfg.Dims) && cfg.Dims[k] >= 0:
				b = cfg.Dims[k]
			case batching && cfg != nil && c < len(cfg.Dims) && cfg.Dims[c] >= 0:
				b = cfg.Dims[c]
			}
			if b < 0 {
				return nil, false
			}
			shape[k] = b
		}
		shapes[p.Name] = shape
	}
	return shapes, true
}

// reserveBounds sizes the generic executable's memory for the bound shapes, when every
// free dim has a bound. Best effort: a failed run is logged, not the model's state.
func (m *model) reserveBounds(v *variant) {
	shapes, ok := m.boundShapes()
	if !ok {
		return
	}
	args := make([]*tensor.Tensor, len(m.iface.Inputs))
	for i, p := range m.iface.Inputs {
		shape := make(tensor.Shape, len(shapes[p.Name]))
		for k, d := range shapes[p.Name] {
			shape[k] = int(d)
		}
		args[i] = tensor.New(p.Type.DType, shape)
	}
	log := m.svc.log.With(zap.String("model", m.name), zap.Int64("version", m.version), zap.Any("shapes", shapes))
	if _, err := v.machine.Run(context.Background(), args); err != nil {
		log.Warn("could not size memory for the upper bounds (it grows on demand)", zap.Error(err))
		return
	}
	st := v.machine.MemoryStats()
	log.Info("memory sized for the upper bounds of the free dims", zap.Int64("pool_bytes", st.Held), zap.Int("buffers", st.Buffers))
}
