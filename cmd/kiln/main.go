package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError marks errors that should exit with status 2.
type usageError struct{ error }

func main() {
	root := &cobra.Command{
		Use:           "kiln",
		Short:         "kiln: a model-serving runtime with an on-device JIT compiler",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(versionCmd())
	root.AddCommand(compilerCommands()...)
	root.AddCommand(cacheCmd(), serveCmd(), devicesCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the kiln version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "kiln", version) },
	}
}

// checkEngine accepts the engines that exist today.
func checkEngine(name string) error {
	switch name {
	case "ref", "compiled":
		return nil
	}
	return usageError{fmt.Errorf("unknown engine %q (available: compiled, ref)", name)}
}
