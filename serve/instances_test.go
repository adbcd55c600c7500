package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
	"github.com/kilnrt/kiln/serve/servetest"
)

// openOnDevices opens a Service on repo whose CPU and GPUs are reference engines (the
// GPUs named opencl:N), logging to an observer.
func openOnDevices(t *testing.T, repo string, cpu Engine, gpus ...Engine) (*Service, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	opts := Options{Repository: repo, Engine: cpu, Log: zap.New(core)}
	for i, g := range gpus {
		opts.GPUs = append(opts.GPUs, GPU{Name: fmt.Sprintf("opencl:%d", i), Engine: g})
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// runsOn counts the executions of a model's instances per device.
func runsOn(t *testing.T, s *Service, name string) map[string]int64 {
	t.Helper()
	m, err := s.lookup(name, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range m.places {
		out[p.dev.name] += p.runs.Load()
	}
	return out
}

// TestRequestsRunOnTheInstancesOfBothDevices: a model with a KIND_GPU group on GPU 0
// and a KIND_CPU group has an instance on each device; requests take the first free
// instance, so both devices serve them, each device loads the model once, and the
// answers agree with the expected output whichever device gave them. The metrics
// count the executions per device.
func TestRequestsRunOnTheInstancesOfBothDevices(t *testing.T) {
	repo, x, want := testRepo(t)
	writeConfig(t, repo, "mlp", `
name: "mlp"
instance_group [ { kind: KIND_GPU gpus: [ 0 ] }, { kind: KIND_CPU } ]
`)
	cpu, gpu := &servetest.Engine{}, &servetest.Engine{}
	s, _ := openOnDevices(t, repo, cpu, gpu)
	answered := map[string]int64{} // by the device each response names
	for i := range 6 {
		resp, err := s.Infer(context.Background(), request(x))
		if err != nil {
			t.Fatal(err)
		}
		if !near(resp.Outputs[0].Data, want) {
			t.Fatalf("request %d on %s: %v, want %v", i, resp.Device, resp.Outputs[0].Data, want)
		}
		answered[resp.Device]++
	}
	runs := runsOn(t, s, "mlp")
	if runs["cpu"] == 0 || runs["opencl:0"] == 0 || runs["cpu"]+runs["opencl:0"] != 6 || fmt.Sprint(answered) != fmt.Sprint(runs) {
		t.Fatalf("executions per device %v, responses per device %v: want both devices to serve the 6 requests", runs, answered)
	}
	if cpu.Loads() != 1 || gpu.Loads() != 1 {
		t.Fatalf("loads: cpu %d, gpu %d; want one executable per device", cpu.Loads(), gpu.Loads())
	}
	if st := s.Index(); st[1].Name != "mlp" || st[1].Compiled != 2 {
		t.Fatalf("index %+v: want mlp with 2 executables (one per device)", st)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Metrics())
	metric := fmt.Sprintf(`
# HELP kiln_device_exec_count Model executions per device the version's instances run on (a batch counts once).
# TYPE kiln_device_exec_count counter
kiln_device_exec_count{device="cpu",model="mlp",version="1"} %d
kiln_device_exec_count{device="opencl:0",model="mlp",version="1"} %d
`, runs["cpu"], runs["opencl:0"])
	if err := testutil.GatherAndCompare(reg, strings.NewReader(metric), "kiln_device_exec_count"); err != nil {
		t.Fatal(err)
	}
}

// TestGroupAskingForAMissingGPURunsOnTheCPU: a KIND_GPU group naming GPU 3 when the
// service has one GPU is served on the CPU, with a warning naming the model and the
// ordinal; the model is READY and answers.
func TestGroupAskingForAMissingGPURunsOnTheCPU(t *testing.T) {
	repo, x, want := testRepo(t)
	writeConfig(t, repo, "mlp", `
name: "mlp"
instance_group [ { kind: KIND_GPU count: 2 gpus: [ 3 ] } ]
`)
	cpu, gpu := &servetest.Engine{}, &servetest.Engine{}
	s, logs := openOnDevices(t, repo, cpu, gpu)
	warned := logs.FilterMessageSnippet("GPU kiln does not have").FilterField(zap.String("model", "mlp")).FilterField(zap.Int32("gpu", 3))
	if warned.Len() != 1 {
		t.Fatalf("%d warnings naming model mlp and GPU 3; logs: %v", warned.Len(), logs.All())
	}
	if ok, err := s.ModelReady("mlp", ""); !ok || err != nil {
		t.Fatalf("mlp ready %v, %v", ok, err)
	}
	for range 3 {
		resp, err := s.Infer(context.Background(), request(x))
		if err != nil {
			t.Fatal(err)
		}
		if !near(resp.Outputs[0].Data, want) {
			t.Fatalf("%v, want %v", resp.Outputs[0].Data, want)
		}
	}
	if runs := runsOn(t, s, "mlp"); runs["cpu"] != 3 || len(runs) != 1 {
		t.Fatalf("executions per device %v, want the 3 on the CPU", runs)
	}
	if gpu.Loads() != 0 {
		t.Fatalf("the GPU engine loaded %d executables for a group asking for GPU 3", gpu.Loads())
	}
	m, _ := s.lookup("mlp", "")
	if m.spec.Instances != 2 {
		t.Fatalf("%d instances, want the group's 2", m.spec.Instances)
	}
}

// failingEngine fails every Load, as a GPU compile that fails does.
type failingEngine struct{ servetest.Engine }

var errGPUCompile = errors.New("clBuildProgram: CL_BUILD_PROGRAM_FAILURE")

func (*failingEngine) Load(context.Context, *engine.Model, map[string][]int64, func(engine.Progress)) (*engine.Loaded, error) {
	return nil, errGPUCompile
}

// TestGPUCompileFailureIsTheModelsLoadError: when a model's first compile for its GPU
// fails, that model turns UNAVAILABLE with a reason naming the device and the cause;
// the service and the other models go on.
func TestGPUCompileFailureIsTheModelsLoadError(t *testing.T) {
	repo, x, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
name: "mlp"
instance_group [ { kind: KIND_GPU } ]
`)
	s, _ := openOnDevices(t, repo, &servetest.Engine{}, &failingEngine{})
	_, err := s.Infer(context.Background(), request(x))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "opencl:0") || !strings.Contains(err.Error(), errGPUCompile.Error()) {
		t.Fatalf("first request: %v; want ErrUnavailable naming opencl:0 and the cause", err)
	}
	st, _ := s.lookup("mlp", "")
	if got := st.status(); got.State != StateUnavailable || !strings.Contains(got.Reason, "compile failed on opencl:0") {
		t.Fatalf("status %+v, want UNAVAILABLE: compile failed on opencl:0", got)
	}
	if !s.Live() {
		t.Fatal("the service is not live after one model's GPU compile failed")
	}
}

// TestInstanceGroupsResolveToDevices: each kind of group and GPU list becomes
// instances on the devices Triton would use, with a GPU the service lacks on the CPU.
func TestInstanceGroupsResolveToDevices(t *testing.T) {
	gpu, cpu := modelpb.ModelInstanceGroup_KIND_GPU, modelpb.ModelInstanceGroup_KIND_CPU
	auto := modelpb.ModelInstanceGroup_KIND_AUTO
	cases := []struct {
		gpus   int
		groups []*modelpb.ModelInstanceGroup
		want   string
	}{
		{2, []*modelpb.ModelInstanceGroup{{Kind: gpu, Count: 2}}, "opencl:0=2 opencl:1=2"},
		{2, []*modelpb.ModelInstanceGroup{{Kind: gpu, Gpus: []int32{1}}, {Kind: cpu, Count: 3}}, "opencl:1=1 cpu=3"},
		{1, []*modelpb.ModelInstanceGroup{{Kind: gpu, Gpus: []int32{0, 3}}}, "opencl:0=1 cpu=1"},
		{0, []*modelpb.ModelInstanceGroup{{Kind: gpu, Count: 2}}, "cpu=2"},
		{1, []*modelpb.ModelInstanceGroup{{Kind: auto}}, "opencl:0=1"},
		{0, []*modelpb.ModelInstanceGroup{{Kind: auto, Count: 2}}, "cpu=2"},
		{1, []*modelpb.ModelInstanceGroup{{Kind: cpu}, {Kind: modelpb.ModelInstanceGroup_KIND_MODEL}}, "cpu=2"},
	}
	for _, c := range cases {
		s := &Service{log: zap.NewNop(), cpu: &device{name: "cpu"}}
		for i := range c.gpus {
			s.gpus = append(s.gpus, &device{name: fmt.Sprintf("opencl:%d", i)})
		}
		var got []string
		for _, o := range s.instancesOf(&modelpb.ModelConfig{Name: "m", InstanceGroup: c.groups}) {
			got = append(got, fmt.Sprintf("%s=%d", o.dev.name, o.count))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%d GPUs, groups %v: %v, want %s", c.gpus, c.groups, got, c.want)
		}
	}
}
