package configs_test

// Checks of the deployment files that sit beside the package: the example server
// config (configs/kiln.yaml), the Kubernetes manifests (configs/k8s) and the
// Dockerfile, against each other and against the server's defaults, so that a port, a
// path or a user changed in one place but not the others fails here rather than in a
// cluster.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kilnrt/kiln/configs"
)

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sObject struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   meta              `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       yaml.Node         `yaml:"spec"`
	file       string
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	FSGroup                  *int64 `yaml:"fsGroup"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type podTemplate struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		TerminationGracePeriodSeconds int             `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               securityContext `yaml:"securityContext"`
		Containers                    []container     `yaml:"containers"`
		Volumes                       []struct {
			Name                  string `yaml:"name"`
			PersistentVolumeClaim *struct {
				ClaimName string `yaml:"claimName"`
			} `yaml:"persistentVolumeClaim"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

func (c container) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func (c container) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// mountOf returns where the pod mounts the volume that satisfies pick.
func (p podTemplate) mountOf(c container, pick func(name string) bool) string {
	for _, v := range p.Spec.Volumes {
		if !pick(v.Name) {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				return m.MountPath
			}
		}
	}
	return ""
}

func (p podTemplate) claimMount(c container, claim string) string {
	return p.mountOf(c, func(name string) bool {
		for _, v := range p.Spec.Volumes {
			if v.Name == name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return true
			}
		}
		return false
	})
}

// nonRoot reports whether the pod or the container says runAsNonRoot, with a
// non-zero user.
func nonRoot(pod securityContext, c securityContext) bool {
	nr := (pod.RunAsNonRoot != nil && *pod.RunAsNonRoot) || (c.RunAsNonRoot != nil && *c.RunAsNonRoot)
	uid := pod.RunAsUser
	if c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	return nr && (uid == nil || *uid != 0)
}

// loadManifests decodes every document of every YAML file in configs/k8s.
func loadManifests(t *testing.T) map[string]*k8sObject {
	t.Helper()
	files, _ := filepath.Glob("k8s/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in configs/k8s")
	}
	objs := map[string]*k8sObject{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", f, i+1, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: document %d lacks apiVersion, kind or metadata.name", f, i+1)
			}
			o.file = f
			key := o.Kind + "/" + o.Metadata.Name
			if objs[key] != nil {
				t.Fatalf("%s: %s defined twice", f, key)
			}
			objs[key] = &o
		}
	}
	return objs
}

func get[T any](t *testing.T, objs map[string]*k8sObject, key string) (*k8sObject, T) {
	t.Helper()
	var spec T
	o := objs[key]
	if o == nil {
		t.Fatalf("no %s in configs/k8s", key)
	}
	if err := o.Spec.Decode(&spec); err != nil {
		t.Fatalf("%s: %s spec: %v", o.file, key, err)
	}
	return o, spec
}

// dockerfile is the Dockerfile's instructions (continuations joined, comments
// dropped), each with the index of its stage.
type instruction struct {
	cmd, args string
	stage     int
}

func parseDockerfile(t *testing.T) []instruction {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage, cur := -1, ""
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur != "" && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if more, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += more + " "
			continue
		}
		cur += trimmed
		cmd, args, _ := strings.Cut(cur, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd, strings.TrimSpace(args), stage})
		cur = ""
	}
	if cur != "" {
		t.Fatalf("Dockerfile ends inside a continued line: %q", cur)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t)
	var froms []string
	last := map[string]instruction{} // the runtime stage's last instruction of each kind
	runtime := 0
	for _, in := range ins {
		if in.cmd == "FROM" {
			froms = append(froms, in.args)
			runtime = in.stage
		}
	}
	if len(froms) != 2 || !regexp.MustCompile(`^golang:1\.26(\.\d+)?-bookworm AS build$`).MatchString(froms[0]) || froms[1] != "debian:bookworm-slim" {
		t.Fatalf("stages %q, want golang:1.26-bookworm AS build, then debian:bookworm-slim", froms)
	}
	var build, runs []string
	userAfterInstall := false
	for _, in := range ins {
		switch {
		case in.stage == 0 && in.cmd == "RUN":
			build = append(build, in.args)
		case in.stage == runtime:
			last[in.cmd] = in
			if in.cmd == "RUN" {
				runs = append(runs, in.args)
				userAfterInstall = false
			}
			if in.cmd == "USER" {
				userAfterInstall = true
			}
		}
	}
	goBuild := strings.Join(build, "\n")
	for _, want := range []string{"CGO_ENABLED=0 go build", "-trimpath", `-ldflags "-s -w -X main.version=`, "./cmd/kiln"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("build stage lacks %q:\n%s", want, goBuild)
		}
	}
	install := strings.Join(runs, "\n")
	for _, pkg := range []string{"gcc", "libc6-dev", "ca-certificates"} {
		if !regexp.MustCompile(`apt-get install [^\n]*\b` + regexp.QuoteMeta(pkg) + `\b`).MatchString(install) {
			t.Errorf("runtime stage does not apt-get install %s", pkg)
		}
	}
	if !strings.Contains(install, "--uid 10001") || !strings.Contains(install, "chown 10001:10001 /var/cache/kiln") {
		t.Errorf("runtime stage: no user 10001 owning /var/cache/kiln:\n%s", install)
	}
	if u := last["USER"].args; !userAfterInstall || !regexp.MustCompile(`^10001(:10001)?$`).MatchString(u) {
		t.Errorf("last USER %q (after the last RUN: %v); want the numeric non-root 10001", u, userAfterInstall)
	}
	if env := last["ENV"].args; !regexp.MustCompile(`(^|\s)KILN_CACHE_DIR=/var/cache/kiln(\s|$)`).MatchString(env) {
		t.Errorf("ENV %q lacks KILN_CACHE_DIR=/var/cache/kiln", env)
	}
	if ex := strings.Fields(last["EXPOSE"].args); !slices.Equal(ex, []string{"8000", "8001", "8002"}) {
		t.Errorf("EXPOSE %v, want 8000 8001 8002", ex)
	}
	if e := last["ENTRYPOINT"].args; e != `["kiln"]` {
		t.Errorf("ENTRYPOINT %s", e)
	}
	if c := last["CMD"].args; c != `["serve", "--model-repository", "/opt/kiln/models"]` {
		t.Errorf("CMD %s", c)
	}
	copied := false
	for _, in := range ins {
		if in.stage == runtime && in.cmd == "COPY" && in.args == "examples/models /opt/kiln/models" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the runtime stage does not COPY examples/models /opt/kiln/models")
	}
	// the image's default ports are the server's
	def := configs.DefaultFile()
	for i, a := range []string{def.HTTP.Address, def.GRPC.Address, def.Metrics.Address} {
		if want := ":" + []string{"8000", "8001", "8002"}[i]; a != want {
			t.Errorf("default address %s, EXPOSE says %s", a, want)
		}
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ignore), "\n")
	for _, want := range []string{".git", ".scratch", "bench/ort/node_modules"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

func TestKubernetesManifests(t *testing.T) {
	objs := loadManifests(t)
	const cacheDir = "/var/cache/kiln" // the image's KILN_CACHE_DIR (TestDockerfile)

	// the Deployment
	dep, ds := get[struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template podTemplate `yaml:"template"`
	}](t, objs, "Deployment/kiln")
	if dep.APIVersion != "apps/v1" || len(ds.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment/kiln: %s with %d containers", dep.APIVersion, len(ds.Template.Spec.Containers))
	}
	pod := ds.Template
	c := pod.Spec.Containers[0]
	for name, port := range map[string]int{"http": 8000, "grpc": 8001, "metrics": 8002} {
		if got := c.port(name); got != port {
			t.Errorf("Deployment port %s = %d, want %d", name, got, port)
		}
	}
	checkProbe := func(what string, p *probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: none, want GET %s on the http port", what, path)
		} else if p.HTTPGet.Path != path || (p.HTTPGet.Port != "http" && p.HTTPGet.Port != "8000") {
			t.Errorf("%s: GET %s on port %s, want GET %s on the http port", what, p.HTTPGet.Path, p.HTTPGet.Port, path)
		}
	}
	checkProbe("startupProbe", c.StartupProbe, "/v2/health/live")
	checkProbe("livenessProbe", c.LivenessProbe, "/v2/health/live")
	checkProbe("readinessProbe", c.ReadinessProbe, "/v2/health/ready")
	if s := c.StartupProbe; s != nil && time.Duration(s.PeriodSeconds*s.FailureThreshold)*time.Second < 5*time.Minute {
		t.Errorf("startupProbe allows %d×%d s; a cold compile needs a generous threshold (≥ 5 min)", s.PeriodSeconds, s.FailureThreshold)
	}
	if !nonRoot(pod.Spec.SecurityContext, c.SecurityContext) {
		t.Errorf("Deployment: runAsNonRoot is not set")
	}
	if got := pod.claimMount(c, "kiln-journal"); got != cacheDir || c.env("KILN_CACHE_DIR") != cacheDir {
		t.Errorf("Deployment: journal PVC mounted at %q, KILN_CACHE_DIR %q; want both %s", got, c.env("KILN_CACHE_DIR"), cacheDir)
	}
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro != nil && *ro {
		tmp := false
		for _, m := range c.VolumeMounts {
			tmp = tmp || m.MountPath == "/tmp"
		}
		if !tmp {
			t.Errorf("Deployment: a read-only root filesystem needs a writable /tmp (the JIT's C compiler)")
		}
	}
	an := pod.Metadata.Annotations
	if an["prometheus.io/scrape"] != "true" || an["prometheus.io/port"] != "8002" || an["prometheus.io/path"] != "/metrics" {
		t.Errorf("Deployment: prometheus annotations %v", an)
	}
	for k, v := range ds.Selector.MatchLabels {
		if pod.Metadata.Labels[k] != v {
			t.Errorf("Deployment: selector %s=%s does not match the pod labels", k, v)
		}
	}

	// the config file it runs with, from the ConfigMap
	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[1] != "--config" {
		t.Fatalf("Deployment args %q, want serve --config FILE", c.Args)
	}
	cfgDir, cfgName := filepath.Split(c.Args[2])
	cmName := ""
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && pod.mountOf(c, func(n string) bool { return n == v.Name }) == filepath.Clean(cfgDir) {
			cmName = v.ConfigMap.Name
		}
	}
	cm := objs["ConfigMap/"+cmName]
	if cm == nil || cm.Data[cfgName] == "" {
		t.Fatalf("Deployment reads %s: no ConfigMap %q mounted there with key %s", c.Args[2], cmName, cfgName)
	}
	p := filepath.Join(t.TempDir(), cfgName)
	os.WriteFile(p, []byte(cm.Data[cfgName]), 0o644)
	cfg, err := configs.LoadFile(p)
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", cmName, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("ConfigMap %s: %v", cmName, err)
	}
	if cfg.Cache.Dir != cacheDir || cfg.Log.Format != "json" || cfg.ModelControlMode != "none" {
		t.Errorf("ConfigMap: cache.dir %q, log.format %q, model_control_mode %q", cfg.Cache.Dir, cfg.Log.Format, cfg.ModelControlMode)
	}
	if lim, ok := strings.CutSuffix(c.Resources.Limits["memory"], "Gi"); !ok {
		t.Errorf("container memory limit %q: want a number of Gi", c.Resources.Limits["memory"])
	} else if gi, _ := strconv.Atoi(lim); cfg.Limits.MemoryLimit <= 0 || cfg.Limits.MemoryLimit >= configs.Size(gi)*configs.GiB {
		t.Errorf("ConfigMap limits.memory_limit %s, want it set below the container's memory limit %s", cfg.Limits.MemoryLimit, c.Resources.Limits["memory"])
	}
	if cpu, _ := strconv.Atoi(c.Resources.Limits["cpu"]); cfg.Threads != cpu {
		t.Errorf("ConfigMap threads %d, container CPU limit %q", cfg.Threads, c.Resources.Limits["cpu"])
	}
	if time.Duration(cfg.ShutdownGrace) >= time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second {
		t.Errorf("shutdown_grace %v is not below terminationGracePeriodSeconds %d", cfg.ShutdownGrace, pod.Spec.TerminationGracePeriodSeconds)
	}
	for i, l := range []configs.Listener{cfg.HTTP.Listener, {Address: cfg.GRPC.Address, Enabled: cfg.GRPC.Enabled}, cfg.Metrics} {
		name := []string{"http", "grpc", "metrics"}[i]
		if _, port, _ := strings.Cut(l.Address, ":"); !l.Enabled || port != strconv.Itoa(c.port(name)) {
			t.Errorf("ConfigMap %s listener %+v, container port %d", name, l, c.port(name))
		}
	}

	// the Service
	_, ss := get[struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	}](t, objs, "Service/kiln")
	for k, v := range ss.Selector {
		if pod.Metadata.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the Deployment's pods", k, v)
		}
	}
	if len(ss.Ports) != 3 {
		t.Errorf("Service: %d ports, want http, grpc, metrics", len(ss.Ports))
	}
	for _, sp := range ss.Ports {
		if n := c.port(sp.TargetPort); n == 0 || n != sp.Port {
			t.Errorf("Service port %s %d → %s (container port %d)", sp.Name, sp.Port, sp.TargetPort, n)
		}
	}

	// the HPA
	_, hs := get[struct {
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource struct {
				Name string `yaml:"name"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	}](t, objs, "HorizontalPodAutoscaler/kiln")
	if hs.ScaleTargetRef.Kind != "Deployment" || hs.ScaleTargetRef.Name != "kiln" || len(hs.Metrics) == 0 || hs.Metrics[0].Resource.Name != "cpu" ||
		hs.MinReplicas < 1 || hs.MaxReplicas < hs.MinReplicas {
		t.Errorf("HPA: %+v", hs)
	}
	if c.Resources.Requests["cpu"] == "" {
		t.Errorf("Deployment: no CPU request, which CPU utilization is measured against")
	}

	// the shared journal
	_, ps := get[struct {
		AccessModes []string `yaml:"accessModes"`
	}](t, objs, "PersistentVolumeClaim/kiln-journal")
	if !slices.Contains(ps.AccessModes, "ReadWriteMany") {
		t.Errorf("journal PVC access modes %v, want ReadWriteMany", ps.AccessModes)
	}

	// the warm-cache Job: kiln prebuild on the same volume
	_, js := get[struct {
		Template podTemplate `yaml:"template"`
	}](t, objs, "Job/kiln-prebuild")
	if len(js.Template.Spec.Containers) != 1 {
		t.Fatalf("Job: %d containers", len(js.Template.Spec.Containers))
	}
	jc := js.Template.Spec.Containers[0]
	argv := append(append([]string{}, jc.Command...), jc.Args...)
	if len(jc.Command) == 0 {
		argv = append([]string{"kiln"}, jc.Args...) // the image's ENTRYPOINT
	}
	if !regexp.MustCompile(`^kiln prebuild --model-repository \S+ --cache-dir /var/cache/kiln$`).MatchString(strings.Join(argv, " ")) {
		t.Errorf("Job runs %q, want kiln prebuild --model-repository DIR --cache-dir %s", argv, cacheDir)
	}
	if got := js.Template.claimMount(jc, "kiln-journal"); got != cacheDir {
		t.Errorf("Job mounts the journal at %q, want %s", got, cacheDir)
	}
	if !nonRoot(js.Template.Spec.SecurityContext, jc.SecurityContext) {
		t.Errorf("Job: runAsNonRoot is not set")
	}
	if jc.Image != c.Image {
		t.Errorf("Job image %q, Deployment image %q: the journal's keys need the same kiln", jc.Image, c.Image)
	}
	selectsJob := true
	for k, v := range ss.Selector {
		selectsJob = selectsJob && js.Template.Metadata.Labels[k] == v
	}
	if selectsJob {
		t.Errorf("the Service selects the prebuild Job's pod too")
	}

	// the KServe runtime
	sr, srs := get[struct {
		Annotations           map[string]string `yaml:"annotations"`
		SupportedModelFormats []struct {
			Name       string `yaml:"name"`
			AutoSelect bool   `yaml:"autoSelect"`
		} `yaml:"supportedModelFormats"`
		ProtocolVersions []string    `yaml:"protocolVersions"`
		Containers       []container `yaml:"containers"`
	}](t, objs, "ServingRuntime/kiln-onnx")
	if sr.APIVersion != "serving.kserve.io/v1alpha1" || len(srs.SupportedModelFormats) == 0 || srs.SupportedModelFormats[0].Name != "onnx" ||
		!slices.Contains(srs.ProtocolVersions, "v2") || !slices.Contains(srs.ProtocolVersions, "grpc-v2") || len(srs.Containers) != 1 {
		t.Fatalf("ServingRuntime: %s %+v", sr.APIVersion, srs)
	}
	kc := srs.Containers[0]
	args := strings.Join(kc.Args, " ")
	for _, want := range []string{"serve", "--model-repository=/mnt/models", "--http-address=:8080", "--grpc-address=:9000", "--metrics-address=:8002"} {
		if !strings.Contains(args, want) {
			t.Errorf("ServingRuntime args %q lack %s", args, want)
		}
	}
	if kc.Name != "kserve-container" || kc.Image != c.Image || len(kc.Ports) == 0 || kc.Ports[0].ContainerPort != 8080 || !nonRoot(securityContext{}, kc.SecurityContext) {
		t.Errorf("ServingRuntime container: %+v", kc)
	}
	if srs.Annotations["prometheus.kserve.io/port"] != "8002" {
		t.Errorf("ServingRuntime: metrics annotation %v", srs.Annotations)
	}
}

// TestExampleConfig: configs/kiln.yaml loads and validates, and every key it sets
// other than model_repository and cache.dir (marked as examples) has its default
// value, as the file's header says.
func TestExampleConfig(t *testing.T) {
	f, err := configs.LoadFile("kiln.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.ModelRepository != "/opt/kiln/models" || f.Cache.Dir != "/var/cache/kiln" {
		t.Errorf("model_repository %q, cache.dir %q", f.ModelRepository, f.Cache.Dir)
	}
	f.ModelRepository, f.Cache.Dir = "", ""
	if !reflect.DeepEqual(f, configs.DefaultFile()) {
		t.Errorf("configs/kiln.yaml departs from the defaults:\n got %+v\nwant %+v", f, configs.DefaultFile())
	}
}
