package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/vm"
)

// finished is exe with each binary whose device finishes compiling it at load
// (devices.Finisher: CUDA's PTX) replaced by the finished binary, from the journal when
// it holds one for the binary, the device's finish key and the schema, else finished
// now and published: a restart, or a replica sharing the journal, loads machine code
// instead of compiling PTX again. Without a journal, or when finishing fails, exe is
// returned as it is (the driver then finishes at load, which reports a bad binary).
func (e *Engine) finished(ctx context.Context, exe *vm.Executable) *vm.Executable {
	j := e.cfg.Journal
	if j == nil || j.Policy() == compilecache.PolicyOff {
		return exe
	}
	var out *vm.Executable
	for i, b := range exe.Binaries {
		f := e.finisherFor(b.Device)
		if f == nil {
			continue
		}
		sum := sha256.Sum256(b.Data)
		m := compilecache.Material{Kind: compilecache.KindKernel, Parts: []compilecache.Component{
			{Name: "binary", Value: hex.EncodeToString(sum[:])},
			{Name: "finish", Value: f.FinishKey()},
			{Name: "schema", Value: Schema()},
		}}
		r, err := j.Do(ctx, m, "finished "+b.Device+" binary", func(context.Context) ([]byte, int, error) {
			o, err := f.Finish(b.Data)
			return o, 0, err
		})
		if err != nil {
			continue
		}
		if out == nil {
			c := *exe
			c.Binaries = append([]vm.Binary(nil), exe.Binaries...)
			out = &c
		}
		out.Binaries[i].Data = r.Blob.Bytes()
	}
	if out == nil {
		return exe
	}
	return out
}

// finisherFor is the engine's device of kind that finishes binaries, or nil.
func (e *Engine) finisherFor(kind string) devices.Finisher {
	for _, d := range e.Devices() {
		if f, ok := d.(devices.Finisher); ok && d.Info().Kind == kind {
			return f
		}
	}
	return nil
}
