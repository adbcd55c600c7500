package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/loader/onnx"
)

func inspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "Describe a model: inputs/outputs with symbolic dims, opsets, op histogram, parameters, unsupported ops",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := onnx.Inspect(args[0], onnx.Options{})
			if err != nil {
				return err
			}
			m, loadErr := onnx.Load(args[0], onnx.Options{})
			out := cmd.OutOrStdout()
			if asJSON {
				doc := map[string]any{"model": args[0], "info": info, "loads": loadErr == nil}
				if loadErr != nil {
					doc["load_error"] = loadErr.Error()
				} else {
					doc["graph_nodes"] = len(m.Main.Nodes)
					doc["symbols"] = m.Symbols
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
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
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
