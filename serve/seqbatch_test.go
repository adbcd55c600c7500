package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

// statefulService serves servetest's stateful and controls models on the test engine,
// the stateful model with config instead of its own when config is not "".
func statefulService(t *testing.T, config string) *Service {
	t.Helper()
	repo := t.TempDir()
	if err := servetest.WriteStatefulRepo(repo); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		writeConfig(t, repo, "stateful", config)
	}
	s, _ := openOnDevices(t, repo, &servetest.Engine{})
	return s
}

// stepInput is step k's x of sequence i.
func stepInput(i, k int) []float32 {
	x := make([]float32, servetest.StatefulWidth)
	for j := range x {
		x[j] = float32(math.Sin(float64(i)*1.3+float64(k)*0.7+float64(j))) * 0.8
	}
	return x
}

// seqRequest is a request of sequence id to model with one row x.
func seqRequest(model string, id any, start, end bool, x []float32) *InferRequest {
	params := map[string]any{paramSequenceID: id}
	if start {
		params[paramSequenceStart] = true
	}
	if end {
		params[paramSequenceEnd] = true
	}
	d := tensor.MustFromSlice(tensor.Shape{1, len(x)}, append([]float32(nil), x...))
	return &InferRequest{Model: model, Params: params, Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, int64(len(x))}, Data: d}}}
}

// runSequence sends the steps of sequence i under id one after another and returns
// each step's y.
func runSequence(t *testing.T, s *Service, i, steps int, id any) ([][]float32, error) {
	var ys [][]float32
	for k := range steps {
		resp, err := s.Infer(context.Background(), seqRequest("stateful", id, k == 0, k == steps-1, stepInput(i, k)))
		if err != nil {
			return nil, err
		}
		if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "y" {
			t.Errorf("sequence %d step %d: outputs %v, want y alone (the state stays on the server)", i, k, resp.Outputs)
		}
		ys = append(ys, resp.Outputs[0].Data.Data.([]float32))
	}
	return ys, nil
}

func sameRows(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if len(a[k]) != len(b[k]) {
			return false
		}
		for j := range a[k] {
			if math.Abs(float64(a[k][j]-b[k][j])) > 1e-6 {
				return false
			}
		}
	}
	return true
}

// TestInterleavedSequencesMatchEachSequenceAlone: 4 sequences of 20 steps sent at once
// (each step after its previous answer) get, with the direct and the oldest strategy,
// the answers each gets when run alone, which are the state recurrence computed here;
// the waits in both configurations make the sequences share executions. Without a
// batch dim (max_batch_size 0) each request runs alone, with the same answers.
func TestInterleavedSequencesMatchEachSequenceAlone(t *testing.T) {
	const seqs, steps = 4, 20
	want := make([][][]float32, seqs)
	for i := range want {
		state := make([]float32, servetest.StatefulWidth)
		for k := range steps {
			var y []float32
			state, y = servetest.StatefulStep(state, stepInput(i, k))
			want[i] = append(want[i], y)
		}
	}
	strategies := map[string]string{
		"direct": `direct { max_queue_delay_microseconds: 30000 minimum_slot_utilization: 1.0 }`,
		"oldest": `oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 30000 }`,
	}
	strategies["unbatched"] = "direct { }" // max_batch_size 0: each request its own execution
	for name, strategy := range strategies {
		t.Run(name, func(t *testing.T) {
			config := strings.Replace(servetest.StatefulConfig, "direct { }", strategy, 1)
			config = strings.Replace(config, "count: 2", "count: 1", 1) // one lane of 4 slots
			if name == "unbatched" {
				config = strings.NewReplacer("max_batch_size: 4", "max_batch_size: 0", "dims: [ 4 ]", "dims: [ 1, 4 ]").Replace(config)
			}
			s := statefulService(t, config)
			for i := range seqs {
				alone, err := runSequence(t, s, i, steps, uint64(100+i))
				if err != nil {
					t.Fatal(err)
				}
				if !sameRows(alone, want[i]) {
					t.Fatalf("sequence %d alone: %v, want %v", i, alone, want[i])
				}
			}
			st, _ := s.Stats("stateful", "1")
			aloneExecs := st[0].ExecutionCount
			var wg sync.WaitGroup
			for i := range seqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := runSequence(t, s, i, steps, uint64(200+i))
					if err != nil {
						t.Error(err)
						return
					}
					if !sameRows(got, want[i]) {
						t.Errorf("sequence %d interleaved: %v, alone %v", i, got, want[i])
					}
				}()
			}
			wg.Wait()
			st, _ = s.Stats("stateful", "1")
			execs := st[0].ExecutionCount - aloneExecs
			t.Logf("%s: %d interleaved requests ran as %d executions; batch sizes over the test: %v", name, seqs*steps, execs, st[0].Batches)
			if st[0].Success.Count != 2*seqs*steps {
				t.Errorf("%d successes counted, want %d", st[0].Success.Count, 2*seqs*steps)
			}
			switch {
			case name == "unbatched" && execs != seqs*steps:
				t.Errorf("%d executions for %d requests to a model without a batch dim", execs, seqs*steps)
			case name != "unbatched" && execs >= seqs*steps:
				t.Errorf("%d executions for %d interleaved requests: the sequences never shared one", execs, seqs*steps)
			}
		})
	}
}

// TestIdleSequenceIsReleased: a sequence idle longer than max_sequence_idle_microseconds
// is released, and its next request without sequence_start fails with Triton's words;
// one that keeps stepping within the limit goes on.
func TestIdleSequenceIsReleased(t *testing.T) {
	s := statefulService(t, strings.Replace(servetest.StatefulConfig, "max_sequence_idle_microseconds: 1000000", "max_sequence_idle_microseconds: 100000", 1))
	x := stepInput(0, 0)
	for _, id := range []any{uint64(7), "seven"} {
		if _, err := s.Infer(context.Background(), seqRequest("stateful", id, true, false, x)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // "seven" keeps stepping within the limit
		time.Sleep(50 * time.Millisecond)
		if _, err := s.Infer(context.Background(), seqRequest("stateful", "seven", false, false, x)); err != nil {
			t.Fatalf("a sequence stepping every 50 ms with 100 ms allowed: %v", err)
		}
	}
	time.Sleep(250 * time.Millisecond)
	_, err := s.Infer(context.Background(), seqRequest("stateful", uint64(7), false, false, x))
	want := "inference request for sequence 7 to model 'stateful' must specify the START flag on the first request of the sequence"
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("after 250 ms idle: %v, want ErrInvalid %q", err, want)
	}
	// restarted, the sequence starts from the initial state again
	resp, err := s.Infer(context.Background(), seqRequest("stateful", uint64(7), true, true, x))
	if err != nil {
		t.Fatal(err)
	}
	_, y := servetest.StatefulStep(make([]float32, len(x)), x)
	if !sameRows([][]float32{resp.Outputs[0].Data.Data.([]float32)}, [][]float32{y}) {
		t.Fatalf("restarted sequence: %v, want %v", resp.Outputs[0].Data, y)
	}
}

// TestSequenceControlsReachTheModel: the model sees START, END, READY and CORRID as
// configured (int32 0/1, fp32 0/1, bool, uint64 ID) on the first, middle and last
// requests of a sequence.
func TestSequenceControlsReachTheModel(t *testing.T) {
	s := statefulService(t, "")
	const id = uint64(1<<40 + 42)
	for k, c := range []struct {
		start, end bool
		want       string
	}{{true, false, "1 0 true"}, {false, false, "0 0 true"}, {false, true, "0 1 true"}} {
		resp, err := s.Infer(context.Background(), seqRequest("controls", id, c.start, c.end, []float32{float32(k)}))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*tensor.Tensor{}
		for _, o := range resp.Outputs {
			got[o.Name] = o.Data
		}
		seen := strings.Join([]string{fmtElem(got["start"]), fmtElem(got["end"]), fmtElem(got["ready"])}, " ")
		if seen != c.want || got["corrid"].Data.([]uint64)[0] != id || got["y"].Data.([]float32)[0] != float32(k) {
			t.Errorf("request %d: start end ready %q corrid %v y %v, want %q, %d, %d", k, seen, got["corrid"], got["y"], c.want, id, k)
		}
	}
	// sequence 5 holds slot 0 and sequence 6 slot 1: 6's request alone runs as a batch
	// of 2, slot 0 a padding row, and gets row 1's controls
	for _, c := range []struct {
		id   uint64
		want string
	}{{5, "1 0 true"}, {6, "1 1 true"}} {
		resp, err := s.Infer(context.Background(), seqRequest("controls", c.id, true, c.id == 6, []float32{float32(c.id)}))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*tensor.Tensor{}
		for _, o := range resp.Outputs {
			got[o.Name] = o.Data
		}
		seen := strings.Join([]string{fmtElem(got["start"]), fmtElem(got["end"]), fmtElem(got["ready"])}, " ")
		if seen != c.want || got["corrid"].Data.([]uint64)[0] != c.id || got["y"].Data.([]float32)[0] != float32(c.id) {
			t.Errorf("sequence %d: start end ready %q corrid %v y %v, want %q", c.id, seen, got["corrid"], got["y"], c.want)
		}
	}
	st, _ := s.Stats("controls", "1")
	if st[0].Batches[2].ComputeInfer.Count != 1 {
		t.Errorf("batch sizes %v, want one batch of 2 (a padding row in slot 0)", st[0].Batches)
	}
}

// fmtElem prints a control's first element ("missing" when the output is absent).
func fmtElem(t *tensor.Tensor) string {
	if t == nil {
		return "missing"
	}
	switch d := t.Data.(type) {
	case []int32:
		return fmt.Sprint(d[0])
	case []float32:
		return fmt.Sprint(d[0])
	case []bool:
		return fmt.Sprint(d[0])
	}
	return "?"
}

// TestSequenceRequestErrors: a request without a correlation ID, one continuing a
// sequence never started, a second start of a sequence in progress, a request of two
// rows and a request for the state output are refused as invalid requests saying so.
func TestSequenceRequestErrors(t *testing.T) {
	s := statefulService(t, "")
	x := stepInput(0, 0)
	two := seqRequest("stateful", uint64(5), true, false, append(append([]float32(nil), x...), x...))
	two.Inputs[0].Shape = []int64{2, 4}
	two.Inputs[0].Data, _ = two.Inputs[0].Data.Reshape(tensor.Shape{2, 4})
	state := seqRequest("stateful", uint64(3), false, false, x)
	state.Outputs = []RequestedOutput{{Name: "state_out"}}
	for _, c := range []struct {
		name string
		req  *InferRequest
		want string
	}{
		{"no ID", seqRequest("stateful", nil, true, false, x), "must specify a non-zero or non-empty correlation ID"},
		{"ID 0", seqRequest("stateful", uint64(0), true, false, x), "must specify a non-zero or non-empty correlation ID"},
		{"negative ID", seqRequest("stateful", int64(-4), true, false, x), "is negative"},
		{"not started", seqRequest("stateful", uint64(9), false, false, x), "inference request for sequence 9 to model 'stateful' must specify the START flag"},
		{"started twice", seqRequest("stateful", uint64(3), true, false, x), "sequence 3 is in progress"},
		{"two rows", two, "one row (batch size 1), not 2"},
		{"state output", state, `output "state_out" is a sequence state`},
	} {
		if c.name == "started twice" {
			if _, err := s.Infer(context.Background(), seqRequest("stateful", uint64(3), true, false, x)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.Infer(context.Background(), c.req)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
}

// TestSequencesBeyondTheSlotsWaitInTheBacklog: with one slot, a second sequence's
// first request waits (here past its deadline) until the first sequence ends; it then
// runs, in order, so that the second sequence goes on from its state.
func TestSequencesBeyondTheSlotsWaitInTheBacklog(t *testing.T) {
	config := strings.Replace(servetest.StatefulConfig, "max_batch_size: 4", "max_batch_size: 1", 1)
	s := statefulService(t, strings.Replace(config, "count: 2", "count: 1", 1))
	xa, xb := stepInput(1, 0), stepInput(2, 0)
	if _, err := s.Infer(context.Background(), seqRequest("stateful", "a", true, false, xa)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Infer(ctx, seqRequest("stateful", "b", true, false, xb)); !errors.Is(err, ErrDeadline) {
		t.Fatalf("sequence b while a holds the only slot: %v, want it queued past its deadline", err)
	}
	if _, err := s.Infer(context.Background(), seqRequest("stateful", "a", false, true, xa)); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Infer(context.Background(), seqRequest("stateful", "b", false, true, xb))
	if err != nil {
		t.Fatalf("sequence b after a ended: %v", err)
	}
	state, _ := servetest.StatefulStep(make([]float32, len(xb)), xb)
	_, y := servetest.StatefulStep(state, xb)
	if !sameRows([][]float32{resp.Outputs[0].Data.Data.([]float32)}, [][]float32{y}) {
		t.Fatalf("sequence b's second request: %v, want %v (its first request ran)", resp.Outputs[0].Data, y)
	}
}

// TestInterleavedSequencesOnTheCompiledEngine: the interleaved sequences on compiled
// executables (the C compiler's) get the state recurrence's answers.
func TestInterleavedSequencesOnTheCompiledEngine(t *testing.T) {
	repo := t.TempDir()
	if err := servetest.WriteStatefulRepo(repo); err != nil {
		t.Fatal(err)
	}
	s := openServiceWith(t, repo, t.TempDir(), Options{SpecializeAfter: 3})
	const seqs, steps = 4, 20
	var wg sync.WaitGroup
	for i := range seqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := runSequence(t, s, i, steps, uint64(1+i))
			if err != nil {
				t.Error(err)
				return
			}
			state := make([]float32, servetest.StatefulWidth)
			for k := range steps {
				var y []float32
				state, y = servetest.StatefulStep(state, stepInput(i, k))
				for j := range y {
					if math.Abs(float64(got[k][j]-y[j])) > 1e-5 {
						t.Errorf("sequence %d step %d: %v, want %v", i, k, got[k], y)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	st, _ := s.Stats("stateful", "1")
	t.Logf("compiled: %d requests, batch sizes %v", st[0].Success.Count, st[0].Batches)
}

// TestSequenceConfigIsCheckedAgainstTheModel: a configuration listing a state input
// among the client inputs, or giving a control input another type than the model's,
// makes the model unavailable with a reason naming the tensor; the completed
// configuration and the metadata of the stateful models leave the state and the
// controls to the server.
func TestSequenceConfigIsCheckedAgainstTheModel(t *testing.T) {
	s := statefulService(t, "")
	c, err := s.ModelConfig("stateful", "1")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Input) != 1 || c.Input[0].Name != "x" || len(c.Output) != 1 || c.Output[0].Name != "y" {
		t.Fatalf("completed config: inputs %v outputs %v, want x and y alone", c.Input, c.Output)
	}
	md, err := s.ModelMetadata("controls", "")
	if err != nil || len(md.Inputs) != 1 || md.Inputs[0].Name != "x" || len(md.Outputs) != 5 {
		t.Fatalf("metadata of the controls model: %+v %v, want the input x alone (the controls are the server's) and the 5 outputs", md, err)
	}
	if md, err = s.ModelMetadata("stateful", ""); err != nil || len(md.Inputs) != 1 || len(md.Outputs) != 1 || md.Outputs[0].Name != "y" {
		t.Fatalf("metadata of the stateful model: %+v %v, want x and y alone", md, err)
	}
	for _, b := range []struct{ name, config, want string }{
		{"state as a config input", strings.Replace(servetest.StatefulConfig, "max_batch_size: 4",
			`max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "state_in" data_type: TYPE_FP32 dims: [ 4 ] } ]`, 1), `"state_in"`},
		{"state of other dims", strings.ReplaceAll(servetest.StatefulConfig, "dims: [ 4 ]", "dims: [ 5 ]"), `state input "state_in" has dims [5]`},
		{"control of another type", strings.Replace(servetest.ControlsConfig, "int32_false_true", "fp32_false_true", 1), `control input "START" is INT32 in the model`},
	} {
		repo := t.TempDir()
		if err := servetest.WriteStatefulRepo(repo); err != nil {
			t.Fatal(err)
		}
		model := "stateful"
		if strings.Contains(b.config, "controls") {
			model = "controls"
		}
		writeConfig(t, repo, model, b.config)
		s, _ := openOnDevices(t, repo, &servetest.Engine{})
		var st Status
		for _, x := range s.Index() {
			if x.Name == model {
				st = x
			}
		}
		if st.State != StateUnavailable || !strings.Contains(st.Reason, b.want) {
			t.Errorf("%s: %s %q, want UNAVAILABLE naming %s", b.name, st.State, st.Reason, b.want)
		}
	}
}

// TestInitialStateFromDataFile: a state's initial_state data_file (raw little-endian
// elements in the model's initial_state folder) is the state of each sequence's first
// request; a missing file makes the model unavailable naming the field.
func TestInitialStateFromDataFile(t *testing.T) {
	init := []float32{0.5, -0.25, 1, 0}
	raw := make([]byte, 0, 16)
	for _, f := range init {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
	}
	config := strings.Replace(servetest.StatefulConfig, "zero_data: true", `data_file: "h0.bin"`, 1)
	for _, present := range []bool{true, false} {
		repo := t.TempDir()
		if err := servetest.WriteStatefulRepo(repo); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, repo, "stateful", config)
		if present {
			os.MkdirAll(filepath.Join(repo, "stateful", "initial_state"), 0o755)
			if err := os.WriteFile(filepath.Join(repo, "stateful", "initial_state", "h0.bin"), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := openOnDevices(t, repo, &servetest.Engine{})
		x := stepInput(3, 0)
		resp, err := s.Infer(context.Background(), seqRequest("stateful", uint64(1), true, true, x))
		if !present {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "initial_state") {
				t.Errorf("without the data file: %v, want the model unavailable naming initial_state", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, y := servetest.StatefulStep(init, x)
		if !sameRows([][]float32{resp.Outputs[0].Data.Data.([]float32)}, [][]float32{y}) {
			t.Fatalf("first request from the file's state: %v, want %v", resp.Outputs[0].Data, y)
		}
	}
}
