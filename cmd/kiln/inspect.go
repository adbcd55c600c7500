//go:build !serveonly

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

func inspectCmd() *cobra.Command {
	var (
		asJSON, plan bool
		level        int
		shapeInputs  shapeFlags
		cf           cacheFlags
		tf           targetFlags
	)
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "Describe a model: inputs/outputs with symbolic dims, opsets, op histogram, parameters, unsupported ops",
		Long: `Describe a model. With --plan, take its executable (for the shapes of --input,
--input-dir or --dims) from the binary journal, compiled into it on a miss (--cache off
compiles every time), and print the execution plan kept beside it: kernel launches per
inference, the fused groups with their anchor ops and strategies, and the static memory
plan's peak arena against the bytes of all planned tensors without reuse. Without --plan it also lists the
model's executables in the journal (--cache-dir): the generic one, which serves every
shape, and those specialized for one shape signature (kiln serve builds them in the
background for shapes it sees often).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, _, err := modelArg(args[0])
			if err != nil {
				return err
			}
			args = []string{model}
			if err := checkLevel(level); err != nil {
				return err
			}
			if plan {
				return inspectPlan(cmd.OutOrStdout(), args[0], shapeInputs, tf, cf, level, asJSON)
			}
			info, err := onnx.Inspect(args[0], onnx.Options{})
			if err != nil {
				return err
			}
			m, loadErr := onnx.Load(args[0], onnx.Options{})
			out := cmd.OutOrStdout()
			vs, dir, vErr := journalVariants(args[0], cf)
			if asJSON {
				doc := map[string]any{"model": args[0], "info": info, "loads": loadErr == nil}
				if loadErr != nil {
					doc["load_error"] = loadErr.Error()
				} else {
					doc["graph_nodes"] = len(m.Main.Nodes)
					doc["symbols"] = m.Symbols
				}
				if vErr == nil {
					doc["journal_variants"] = vs
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			printInfo(out, args[0], info)
			if loadErr != nil {
				fmt.Fprintf(out, "load: FAILS: %v\n", loadErr)
			} else {
				fmt.Fprintf(out, "load: ok, %d top-level graph nodes, symbols %v\n", len(m.Main.Nodes), m.Symbols)
			}
			if vErr != nil {
				fmt.Fprintf(out, "journal (%s): cannot read: %v\n", dir, vErr)
			} else {
				printVariants(out, vs, dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&plan, "plan", false, "compile and print the execution plan (kernels, fused groups, memory)")
	cmd.Flags().IntVarP(&level, "opt", "O", defaultLevel, "with --plan: "+levelHelp())
	shapeInputs.register(cmd)
	tf.register(cmd)
	tf.registerCUDAArch(cmd, false)
	cf.register(cmd.Flags(), "on") // the journal whose executables are listed, and --plan's
	return cmd
}

// inspectPlan prints a model's execution plan: that of its executable in the journal
// (compiled into it on a miss, applying the journal's tuning records for the target as
// every compile through the journal does; the kernels they changed are marked), or,
// with --cache off, of a compile of its own.
func inspectPlan(out io.Writer, path string, s shapeFlags, tf targetFlags, cf cacheFlags, level int, asJSON bool) error {
	m, err := onnx.Load(path, onnx.Options{})
	if err != nil {
		return err
	}
	shapes, err := s.shapes(m)
	if err != nil {
		return err
	}
	ds, err := tf.open(0, true)
	if err != nil {
		return err
	}
	defer ds.Close()
	onnxNodes, modelBytes, err := modelTensors(m, shapes)
	if err != nil {
		return err
	}
	co := compileOptions{level: level} // progress on stderr
	res, st, err := planOf(path, m, shapes, ds, cf, co)
	if err != nil {
		return err
	}
	took, how := res.Took, "compiled in"
	if !res.Compiled() {
		how = "from the journal in"
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"model": path, "level": level, "target": ds.describe(), "inputs": res.Exe.Inputs, "stats": st, "journal": res.Outcome.String(), "compiled": res.Compiled(), "took_s": took.Seconds(),
			"model_nodes": onnxNodes, "model_intermediate_bytes": modelBytes})
	}
	fmt.Fprintf(out, "plan for %s at O%d on %s, %s %v for", path, level, ds.describe(), how, took.Round(time.Millisecond))
	for _, in := range res.Exe.Inputs {
		fmt.Fprintf(out, " %s %s", in.Name, in.TypeString())
	}
	fmt.Fprintf(out, "\nkernel launches per inference: %d (%d graph nodes after the passes, %d run inside another's kernel; %d unique kernels)\n",
		st.Launches, st.Nodes, st.Fused, st.Kernels)
	ratio := 0.0
	if st.UnplannedSum > 0 {
		ratio = float64(st.ArenaBytes) / float64(st.UnplannedSum)
	}
	fmt.Fprintf(out, "peak arena: %s; planned tensors without reuse: %s (%.2f); constants: %s\n",
		byteSize(st.ArenaBytes), byteSize(st.UnplannedSum), ratio, byteSize(st.ConstantBytes))
	fmt.Fprintf(out, "layout transforms per inference: %d (%s reordered)\n", st.LayoutTransforms, byteSize(st.LayoutBytes))
	if st.ConcatsInPlace > 0 {
		fmt.Fprintf(out, "concatenations written in place by their inputs' kernels: %d\n", st.ConcatsInPlace)
	}
	if modelBytes > 0 {
		fmt.Fprintf(out, "the model as loaded: %d nodes, intermediate tensors %s (peak arena / that: %.2f; kernel launches / nodes: 1/%.1f)\n",
			onnxNodes, byteSize(modelBytes), float64(st.ArenaBytes)/float64(modelBytes), float64(onnxNodes)/float64(max(st.Launches, 1)))
	}
	if ds.gpu != nil {
		on := map[string]int{}
		for _, g := range st.Groups {
			on[g.Device]++
		}
		fmt.Fprintf(out, "devices: %d kernel launches on %s, %d on the CPU; %d copies between them\n",
			on[ds.target.Kind.String()], ds.target.Kind, on["cpu"], st.Copies)
		if ds.target.Kind == target.OpenCL { // the backend with a texture path
			printTensorPlaces(out, st)
		}
	}
	tuned := 0
	for _, g := range st.Groups {
		if g.Tuned != "" {
			tuned++
		}
	}
	fmt.Fprintf(out, "tuned kernel launches: %d of %d (tuning records of this target in the journal: kiln tune)\n", tuned, len(st.Groups))
	fmt.Fprintln(out, "kernel launches (device, kernel, strategy, anchor + fused nodes):")
	for i, g := range st.Groups {
		fused := ""
		if len(g.Fused) > 0 {
			fused = " + " + strings.Join(g.Fused, " + ")
		}
		fmt.Fprintf(out, "  %3d  %-6s %-28s %-34s %s%s\n", i+1, g.Device, g.Kernel, g.Strategy, g.Anchor, fused)
		if g.Tuned != "" {
			fmt.Fprintf(out, "       tuned: %s (workload %s)\n", g.Tuned, g.Workload)
		}
		if g.Why != "" {
			fmt.Fprintf(out, "       %s\n", g.Why)
		}
	}
	return nil
}

// planOf returns the model's executable for the shapes with its plan: through the
// journal (the plan stored beside the executable; compiled again, outside the journal,
// when the journal has the executable but not its plan), or compiled here with --cache
// off.
func planOf(path string, m *graph.Module, shapes map[string]*tensor.Tensor, ds *deviceSet, cf cacheFlags, co compileOptions) (*engine.Built, *engine.Stats, error) {
	if cf.policy != "off" {
		j, err := cf.open(newLogger(co.quiet))
		if err != nil {
			return nil, nil, err
		}
		defer j.Close()
		res, e, err := compileCachedOn(j, path, shapes, ds, co)
		if err != nil {
			return nil, nil, err
		}
		st, err := e.Plan(res)
		if err == nil {
			return res, st, nil
		}
		if !errors.Is(err, engine.ErrNoPlan) {
			return nil, nil, err
		}
		fmt.Fprintf(os.Stderr, "journal: %v; compiling for the plan\n", err)
	}
	res, _, err := compileModel(m, shapes, ds, co)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, res.Stats, nil
}

// printTensorPlaces prints where the kernels' outputs live on a GPU target: the share
// of their bytes in textures, then each tensor's scope and image size (or why it is in
// a buffer).
func printTensorPlaces(out io.Writer, st *engine.Stats) {
	var all int64
	for _, p := range st.Tensors {
		all += p.Bytes
	}
	share := 0.0
	if all > 0 {
		share = 100 * float64(st.TextureBytes) / float64(all)
	}
	fmt.Fprintf(out, "tensors written by kernels: %s, %s of them (%.1f%%) in image2d textures:\n", byteSize(all), byteSize(st.TextureBytes), share)
	for _, p := range st.Tensors {
		where := p.Scope
		if p.Image != "" {
			where += " " + p.Image
		}
		if p.Why != "" {
			where += ": " + p.Why
		}
		fmt.Fprintf(out, "       %-10s %-40s %s\n", byteSize(p.Bytes), strconv.Quote(p.Name), where)
	}
}

func printInfo(w io.Writer, path string, info *onnx.ModelInfo) {
	fmt.Fprintf(w, "model:    %s\nproducer: %s (IR version %d)\n", path, info.Producer, info.IRVersion)
	doms := make([]string, 0, len(info.Opsets))
	for d := range info.Opsets {
		doms = append(doms, d)
	}
	sort.Strings(doms)
	fmt.Fprint(w, "opsets:  ")
	for _, d := range doms {
		name := d
		if name == "" {
			name = "ai.onnx"
		}
		fmt.Fprintf(w, " %s=%d", name, info.Opsets[d])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "inputs:")
	for _, io := range info.Inputs {
		fmt.Fprintf(w, "  %-24s %v\n", io.Name, io.Type)
	}
	fmt.Fprintln(w, "outputs:")
	for _, io := range info.Outputs {
		fmt.Fprintf(w, "  %-24s %v\n", io.Name, io.Type)
	}
	fmt.Fprintf(w, "parameters: %d elements, %.2f MB\n", info.ParamCount, float64(info.ParamBytes)/1e6)
	fmt.Fprintf(w, "nodes: %d (subgraphs included)\n", info.Nodes)
	ops := make([]string, 0, len(info.OpCounts))
	for k := range info.OpCounts {
		ops = append(ops, k)
	}
	sort.Slice(ops, func(i, j int) bool {
		if info.OpCounts[ops[i]] != info.OpCounts[ops[j]] {
			return info.OpCounts[ops[i]] > info.OpCounts[ops[j]]
		}
		return ops[i] < ops[j]
	})
	fmt.Fprintln(w, "ops:")
	for _, k := range ops {
		fmt.Fprintf(w, "  %5d  %s\n", info.OpCounts[k], k)
	}
	if len(info.Unsupported) == 0 {
		fmt.Fprintln(w, "unsupported ops: none")
		return
	}
	fmt.Fprintln(w, "unsupported ops:")
	for _, u := range info.Unsupported {
		fmt.Fprintf(w, "  %s\n", u.Error())
	}
}
