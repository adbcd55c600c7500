package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kilnrt/kiln/serve"
	"github.com/kilnrt/kiln/serve/grpcapi"
	"github.com/kilnrt/kiln/serve/httpapi"
)

// defaultRepository is the bundled example repository, relative to the repository root.
const defaultRepository = "examples/models"

func serveCmd() *cobra.Command {
	var (
		repo, httpAddr, grpcAddr, metricsAddr, maxBody string
		threads, instances                int
		eager                             bool
		grace                             time.Duration
		cf                                cacheFlags
	)
	cmd := &cobra.Command{
		Use:   "serve [--model-repository DIR]",
		Short: "Serve a model repository over the Open Inference Protocol (KServe v2 REST and gRPC)",
		Long: `Serve every <repo>/<model>/<version>/model.onnx over HTTP (Open Inference Protocol v2,
Triton-compatible paths, JSON and binary tensor data) and over gRPC (Triton's
inference.GRPCInferenceService, grpc.health.v1 and server reflection; --grpc-address,
empty to disable). A model compiles on its first
request (--eager: at start) through the binary journal, so restarts and replicas sharing
--cache-dir start warm. Without --model-repository it serves the bundled examples
(examples/models: a small MLP and SqueezeNet 1.1). SIGTERM or Ctrl-C: readiness turns
false, requests in flight finish (up to --grace), then the server exits.
Each model's config.pbtxt (Triton's format; optional) sets batching (max_batch_size,
dynamic_batching), instance groups and the version policy. Prometheus metrics
(Triton's nv_inference_* names, kiln_compile_seconds, kiln_journal_*_total,
kiln_model_state) are on --metrics-address at /metrics.
Not yet: repository load/unload, TLS, auth, JSON logs with request ids (issue #8).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				repo = defaultRepository
				if _, err := os.Stat(repo); err != nil {
					return usageError{fmt.Errorf("no --model-repository given and the bundled %s is not here (run from the kiln source tree, or pass a repository)", defaultRepository)}
				}
			}
			limit, err := parseBytes(maxBody)
			if err != nil {
				return usageError{fmt.Errorf("--max-request-bytes: %w", err)}
			}
			log := newLogger(false)
			defer log.Sync()
			j, err := cf.open(log)
			if err != nil {
				return err
			}
			defer j.Close()
			dev, err := openCPU(threads, true)
			if err != nil {
				return err
			}
			defer dev.Close()
			svc, err := serve.New(serve.Options{Repository: repo, CPU: dev, Journal: j, Log: log, Eager: eager, Instances: instances})
			if err != nil {
				return err
			}
			defer svc.Close()
			ln, err := net.Listen("tcp", httpAddr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: httpapi.New(svc, httpapi.Options{MaxRequestBytes: limit, Version: version, Log: log}), ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, 2)
			go func() { errc <- srv.Serve(ln) }()
			var gsrv *grpc.Server
			grpcShown, stopping := "off", make(chan struct{})
			if grpcAddr != "" {
				gln, err := net.Listen("tcp", grpcAddr)
				if err != nil {
					srv.Close()
					return fmt.Errorf("--grpc-address: %w", err)
				}
				gsrv = grpcapi.New(svc, grpcapi.Options{Version: version, Log: log, Stopping: stopping})
				go func() { errc <- gsrv.Serve(gln) }()
				grpcShown = gln.Addr().String()
			}
			metricsShown := "off"
			var msrv *http.Server
			if metricsAddr != "" {
				mln, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					srv.Close()
					return fmt.Errorf("--metrics-address: %w", err)
				}
				reg := prometheus.NewRegistry()
				reg.MustRegister(svc.Metrics(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				mux := http.NewServeMux()
				mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { errc <- msrv.Serve(mln) }()
				metricsShown = mln.Addr().String()
			}
			for _, st := range svc.Index() {
				log.Info("model", zap.String("name", st.Name), zap.String("version", st.Version), zap.String("state", string(st.State)), zap.String("reason", st.Reason))
			}
			log.Info("serving", zap.String("http", ln.Addr().String()), zap.String("grpc", grpcShown), zap.String("metrics", metricsShown), zap.String("repository", repo), zap.String("journal", j.Dir()))
			grpcNote := ""
			if gsrv != nil {
				grpcNote = " and gRPC on " + grpcShown
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kiln is serving %s on http://%s%s. Try:\n\n%s\n\n", repo, ln.Addr(), grpcNote, exampleCurl(ln.Addr().String(), svc))
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			select {
			case err := <-errc:
				return err
			case s := <-sig:
				log.Info("shutting down: draining requests in flight", zap.String("signal", s.String()), zap.Duration("grace", grace))
			}
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			drained := svc.Drain(ctx)
			close(stopping) // ends health Watch calls and idle inference streams
			grpcStopped := make(chan struct{})
			go func() {
				defer close(grpcStopped)
				if gsrv == nil {
					return
				}
				// GracefulStop waits for the calls still open; at the end of the grace
				// period the rest are cut.
				done := make(chan struct{})
				go func() { gsrv.GracefulStop(); close(done) }()
				select {
				case <-done:
				case <-ctx.Done():
					log.Warn("shutdown: gRPC calls still open after the grace period; closing them")
					gsrv.Stop()
					<-done
				}
			}()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("shutdown", zap.Error(err))
			}
			<-grpcStopped
			if msrv != nil {
				msrv.Close()
			}
			if drained != nil {
				return fmt.Errorf("requests still running after the %v grace period", grace)
			}
			log.Info("stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "model-repository", "", "the model repository (default: the bundled "+defaultRepository+")")
	f.StringVar(&httpAddr, "http-address", ":8000", "REST listen address")
	f.StringVar(&grpcAddr, "grpc-address", ":8001", "gRPC listen address (empty: no gRPC)")
	f.StringVar(&metricsAddr, "metrics-address", ":8002", "Prometheus /metrics listen address (empty: none)")
	f.StringVar(&maxBody, "max-request-bytes", "64MiB", "largest request body, after decompression")
	f.IntVar(&threads, "threads", 0, "threads of the CPU device (0: every core)")
	f.IntVar(&instances, "instances", 1, "requests one model version runs at once (the rest queue)")
	f.BoolVar(&eager, "eager", false, "compile every model with static input shapes at start (readiness waits for it)")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long SIGTERM waits for requests in flight")
	cf.register(f, "on")
	return cmd
}

// exampleCurl is a ready-to-paste request for the first servable model with small
// inputs (the bundled MLP), or a metadata query otherwise.
func exampleCurl(addr string, svc *serve.Service) string {
	host := addr
	if h, p, err := net.SplitHostPort(addr); err == nil && (h == "::" || h == "0.0.0.0" || h == "") {
		host = "localhost:" + p
	}
	for _, st := range svc.Index() {
		md, err := svc.ModelMetadata(st.Name, st.Version)
		if err != nil || len(md.Inputs) != 1 || md.Inputs[0].Datatype != "FP32" {
			continue
		}
		shape, n := []int64{}, int64(1)
		for _, d := range md.Inputs[0].Shape {
			if d < 0 {
				d = 1
			}
			shape, n = append(shape, d), n*d
		}
		if n > 64 {
			continue
		}
		data := "["
		for i := int64(0); i < n; i++ {
			if i > 0 {
				data += ","
			}
			data += fmt.Sprintf("%.1f", float64(i%7)/7)
		}
		data += "]"
		return fmt.Sprintf(`curl -s http://%s/v2/models/%s/infer -H 'Content-Type: application/json' \
  -d '{"inputs":[{"name":"%s","datatype":"FP32","shape":%s,"data":%s}]}'`,
			host, st.Name, md.Inputs[0].Name, jsonInts(shape), data)
	}
	return fmt.Sprintf("curl -s http://%s/v2/repository/index -X POST", host)
}

func jsonInts(v []int64) string {
	s := "["
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(x)
	}
	return s + "]"
}
