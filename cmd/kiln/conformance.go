//go:build !serveonly

package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/cmd/kiln/internal/conformance"
)

func conformanceCmd() *cobra.Command {
	var (
		engine, filter string
		asJSON, strict bool
		boundsCheck    bool
		atol, rtol     float64
		timeout        time.Duration
		threads, level int
		tf             targetFlags
	)
	cmd := &cobra.Command{
		Use:   "conformance [--engine ref|compiled] DIR...",
		Short: "Run ONNX-backend-layout test cases (model.onnx + test_data_set_N) and compare outputs",
		Long: `Each DIR is a case folder (holding model.onnx) or a folder of case folders, such as
/usr/share/libonnx-testdata/data/node or the model zoo. One line is printed per case
(PASS, FAIL with the reason, UNSUPPORTED with the reason) and a closing line
"N passed, N failed, N skipped". Floats compare with |got-want| <= atol + rtol*|want|.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEngine(engine); err != nil {
				return err
			}
			if err := checkLevel(level); err != nil {
				return err
			}
			opts := conformance.Options{
				Engine:    conformance.RefEngine,
				Tolerance: conformance.Tolerance{Atol: atol, Rtol: rtol},
				Timeout:   timeout,
			}
			if boundsCheck && engine != "compiled" {
				return usageError{fmt.Errorf("--bounds-check needs --engine compiled")}
			}
			if engine == "compiled" {
				ds, err := tf.open(threads, true)
				if err != nil {
					return err
				}
				defer ds.Close()
				run, closeEngine := conformance.CompiledEngineWith(ds.cpu, conformance.CompiledOptions{Level: level, BoundsCheck: boundsCheck, GPU: ds.gpu, Target: ds.target,
					NoTextures: ds.noTextures, TextureLimit: ds.textureLimit, Precision: ds.precision})
				defer closeEngine()
				opts.Engine = run
			}
			if filter != "" {
				re, err := regexp.Compile(filter)
				if err != nil {
					return usageError{fmt.Errorf("--filter: %w", err)}
				}
				opts.Filter = re
			}
			cases, err := conformance.FindCases(args)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var results []conformance.Result
			for _, c := range cases {
				if opts.Filter != nil && !opts.Filter.MatchString(c) {
					continue
				}
				r := conformance.RunCase(c, opts)
				results = append(results, r)
				if !asJSON {
					switch r.Status {
					case conformance.Pass:
						if r.Reason != "" {
							fmt.Fprintf(out, "PASS %s (%.2fs, %s)\n", r.Case, r.Seconds, r.Reason)
							break
						}
						fmt.Fprintf(out, "PASS %s (%.2fs, max err %.2g)\n", r.Case, r.Seconds, r.MaxErr)
					case conformance.Fail:
						fmt.Fprintf(out, "FAIL %s: %s\n", r.Case, r.Reason)
					case conformance.BadData:
						fmt.Fprintf(out, "BADDATA %s: %s\n", r.Case, r.Reason)
					default:
						fmt.Fprintf(out, "UNSUPPORTED %s: %s\n", r.Case, r.Reason)
					}
				}
			}
			sum := conformance.Summarize(results)
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"engine": engine, "cases": results,
					"passed": sum.Passed, "failed": sum.Failed, "skipped": sum.Skipped, "baddata": sum.BadData}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out, sum)
			}
			if strict && sum.Failed > 0 {
				return fmt.Errorf("%d cases failed", sum.Failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&engine, "engine", "ref", "engine to run: ref (the reference evaluator) or compiled (generated kernels on the VM)")
	f.IntVar(&threads, "threads", 0, "threads for parallel kernels with --engine compiled (0: every core)")
	f.IntVarP(&level, "opt", "O", defaultLevel, "with --engine compiled: "+levelHelp())
	f.BoolVar(&boundsCheck, "bounds-check", false, "with --engine compiled: "+boundsCheckHelp)
	f.StringVar(&filter, "filter", "", "only run cases whose path matches this regular expression")
	f.BoolVar(&asJSON, "json", false, "print results as JSON")
	f.BoolVar(&strict, "strict", false, "exit with status 1 if any case fails")
	f.Float64Var(&atol, "atol", 1e-4, "absolute tolerance for floating-point outputs")
	f.Float64Var(&rtol, "rtol", 1e-3, "relative tolerance for floating-point outputs")
	f.DurationVar(&timeout, "timeout", 60*time.Second, "time limit per case")
	tf.register(cmd)
	return cmd
}
