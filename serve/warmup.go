package serve

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/internal/safefile"
	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/tensor"
)

// Model warm-up (Triton's model_warmup): a model version with warm-up samples compiles
// at start for the samples' shapes and runs each sample Count times on each device its
// instances run on before it turns READY. Samples run directly on the executable, not
// through the statistics. Data is zeros, random values, or a raw little-endian file
// under <model>/warmup/.

// warmup runs a model version's warm-up samples; an error makes it UNAVAILABLE.
func (s *Service) warmup(m *model) error {
	m.mu.Lock()
	m.warming = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.warming = false
		m.mu.Unlock()
	}()
	for _, w := range m.config.ModelWarmup {
		args := make([]*tensor.Tensor, len(m.iface.Inputs))
		shapes := map[string][]int64{}
		for i, p := range m.iface.Inputs {
			in, ok := w.Inputs[p.Name]
			if !ok && p.Default != nil && m.spec.optional[p.Name] {
				args[i], shapes[p.Name] = p.Default, shapeOf(p.Default)
				continue
			}
			if !ok {
				return fmt.Errorf("warm-up sample %q has no input %q", w.Name, p.Name)
			}
			shape := in.Dims
			if m.config.MaxBatchSize > 0 {
				shape = append([]int64{int64(max(w.BatchSize, 1))}, in.Dims...)
			}
			t, err := warmupTensor(m, w.Name, p.Name, in, shape)
			if err != nil {
				return err
			}
			if t.DType != p.Type.DType {
				return fmt.Errorf("warm-up sample %q: input %q is %v, the model takes %v", w.Name, p.Name, t.DType, p.Type.DType)
			}
			if t, shape, ok = m.spec.io.toModel(p.Name, t, shape); !ok { // the sample's dims are the config's
				return fmt.Errorf("warm-up sample %q: input %q has dims %v, not the config's", w.Name, p.Name, in.Dims)
			}
			args[i], shapes[p.Name] = t, shape
		}
		for _, p := range m.places {
			v, err := m.variantFor(s.ctx, p, shapes)
			if err != nil {
				return fmt.Errorf("warm-up sample %q%s: %w", w.Name, p.dev.on, err)
			}
			for range max(w.Count, 1) {
				if _, err := v.machine.Run(context.Background(), args); err != nil {
					return fmt.Errorf("warm-up sample %q%s: %w", w.Name, p.dev.on, err)
				}
			}
			s.log.Info("model warmed up", zap.String("model", m.name), zap.String("device", p.dev.name), zap.String("sample", w.Name), zap.Uint32("runs", max(w.Count, 1)))
		}
	}
	return nil
}

// maxWarmupBytes bounds one warm-up input (its dims come from config.pbtxt).
const maxWarmupBytes = 1 << 30

func warmupTensor(m *model, sample, name string, in *modelpb.ModelWarmup_Input, shape []int64) (*tensor.Tensor, error) {
	oip, ok := modelrepo.DataTypeToOIP(in.DataType)
	if !ok {
		return nil, fmt.Errorf("warm-up sample %q: input %q has no data type", sample, name)
	}
	dt, err := DTypeOf(oip)
	if err != nil {
		return nil, err
	}
	ts := make(tensor.Shape, len(shape))
	for i, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("warm-up sample %q: input %q needs concrete dims, not %v", sample, name, in.Dims)
		}
		ts[i] = int(d)
	}
	n, err := ts.CheckedNumElements(maxWarmupBytes / int64(max(dt.Size(), 1)))
	if err != nil {
		return nil, fmt.Errorf("warm-up sample %q: input %q: %w", sample, name, err)
	}
	switch {
	case in.GetInputDataFile() != "":
		// <model>/warmup/<file>: inside that folder (symlinks resolved), a regular file,
		// no larger than the tensor it fills (DecodeRaw checks the exact size)
		p, err := safefile.Within(filepath.Join(filepath.Dir(filepath.Dir(m.path)), "warmup"), in.GetInputDataFile())
		if err != nil {
			return nil, fmt.Errorf("warm-up sample %q: input_data_file %q: %w", sample, in.GetInputDataFile(), err)
		}
		limit := n * int64(dt.Size())
		if dt == tensor.String { // BYTES: length-prefixed elements of any size
			limit = maxWarmupBytes
		}
		raw, err := safefile.ReadFile(p, limit)
		if err != nil {
			return nil, fmt.Errorf("warm-up sample %q: %w", sample, err)
		}
		return DecodeRaw(name, oip, shape, raw)
	case in.GetRandomData() && dt.IsFloat():
		v := make([]float64, n)
		r := rand.New(rand.NewSource(int64(n)))
		for i := range v {
			v[i] = r.Float64()*2 - 1
		}
		return tensor.FromFloat64s(dt, ts, v), nil
	}
	return tensor.New(dt, ts), nil // zero data, and random integers as zeros (valid ids)
}
