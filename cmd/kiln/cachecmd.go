package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/compilecache"
)

func cacheCmd() *cobra.Command {
	var cf cacheFlags
	cmd := &cobra.Command{
		Use:   "cache ls|verify|gc|export|import",
		Short: "Inspect and maintain the binary journal of compiled executables and kernels",
	}
	cf.register(cmd.PersistentFlags(), "on")
	open := func(cmd *cobra.Command) (*compilecache.Journal, error) {
		return cf.open(newLogger(false))
	}
	// openReadOnly: ls and verify only read, so they work on a cache this user may not
	// write, and never repair or create anything
	openReadOnly := func(cmd *cobra.Command) (*compilecache.Journal, error) {
		ro := cf
		if ro.policy != string(compilecache.PolicyOff) {
			ro.policy = string(compilecache.PolicyReadOnly)
		}
		return ro.open(newLogger(false))
	}
	var verbose bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the entries, most recently used first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			j, err := openReadOnly(cmd)
			if err != nil {
				return err
			}
			defer j.Close()
			es, err := j.Entries()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tKIND\tLABEL\tSIZE\tSTORED\tCREATED\tLAST USE")
			var total int64
			for _, e := range es {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Key.Short(), e.Material.Kind, e.Label, byteSize(e.Size), byteSize(e.Stored),
					e.Created.Format(time.DateTime), e.LastUse.Format(time.DateTime))
				total += e.Stored
				if verbose {
					for _, c := range e.Material.Parts {
						fmt.Fprintf(w, "\t  %s\t%s\n", c.Name, c.Value)
					}
				}
			}
			w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "%d entries, %s in %s\n", len(es), byteSize(total), j.Dir())
			return printTuningRecords(cmd.OutOrStdout(), j, verbose)
		},
	}
	ls.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every entry's key material")
	var quarantine bool
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Read every entry in full (checksums and content hash), read-only; exit 1 if any is damaged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			openVerify := openReadOnly
			if quarantine {
				openVerify = open
			}
			j, err := openVerify(cmd)
			if err != nil {
				return err
			}
			defer j.Close()
			n, probs, err := j.Verify()
			if err != nil {
				return err
			}
			for _, p := range probs {
				fmt.Fprintf(cmd.OutOrStdout(), "damaged: %s (%s): %v\n", p.Entry.Key.Short(), p.Entry.Label, p.Err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified %d entries: %d damaged\n", n, len(probs))
			if len(probs) > 0 {
				if j.Policy() == compilecache.PolicyReadOnly {
					return fmt.Errorf("%d damaged entries (left in place: a writer quarantines and rebuilds each when it next reads it; --quarantine does it now)", len(probs))
				}
				return fmt.Errorf("%d damaged entries (quarantined; they will be rebuilt)", len(probs))
			}
			return nil
		},
	}
	verify.Flags().BoolVar(&quarantine, "quarantine", false, "open the journal for writing and quarantine the damaged entries now")
	var gcBudget string
	gc := &cobra.Command{
		Use:   "gc",
		Short: "Evict beyond --budget, remove unreferenced blobs, leftovers, stale build locks and the quarantine, compact the journal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			budget, err := parseBytes(gcBudget)
			if err != nil {
				return usageError{fmt.Errorf("--budget: %w", err)}
			}
			j, err := open(cmd)
			if err != nil {
				return err
			}
			defer j.Close()
			r, err := j.GC(compilecache.GCOptions{Budget: budget})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "evicted %d entries, removed %d unreferenced blobs, %d temporary files, %d stale build locks, %d work directories of dead processes, %d quarantined files: %s freed\n",
				r.Evicted, r.OrphanBlobs, r.TempFiles, r.StaleLocks, r.WorkDirs, r.Quarantined, byteSize(r.FreedBytes))
			return nil
		},
	}
	gc.Flags().StringVar(&gcBudget, "budget", "", "evict least recently used entries beyond this size (e.g. 2GiB)")
	var out string
	export := &cobra.Command{
		Use:   "export [KEY...] -o FILE.tar",
		Short: "Write entries (all, or the given keys) and their blobs to a tarball, e.g. to bake into an image",
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys []compilecache.Key
			for _, a := range args {
				k, err := resolveKey(open, cmd, a)
				if err != nil {
					return err
				}
				keys = append(keys, k)
			}
			j, err := open(cmd)
			if err != nil {
				return err
			}
			defer j.Close()
			var w io.Writer = cmd.OutOrStdout()
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			n, err := j.Export(w, keys)
			if err != nil {
				return err
			}
			recs, _ := j.AllTuningRecords()
			fmt.Fprintf(os.Stderr, "exported %d entries and %d tuning records\n", n, len(recs))
			return nil
		},
	}
	export.Flags().StringVarP(&out, "output", "o", "-", "the tarball to write (- for stdout)")
	imp := &cobra.Command{
		Use:   "import FILE.tar",
		Short: "Verify and publish the entries of an exported tarball (- for stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := open(cmd)
			if err != nil {
				return err
			}
			defer j.Close()
			var r io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			n, err := j.Import(r)
			if err != nil {
				return err
			}
			recs, _ := j.AllTuningRecords()
			fmt.Fprintf(cmd.OutOrStdout(), "imported %d entries; the journal holds %d tuning records\n", n, len(recs))
			return nil
		},
	}
	for _, c := range []*cobra.Command{ls, verify, gc, export, imp} {
		cmd.AddCommand(c)
	}
	return cmd
}

// printTuningRecords counts the journal's tuning records and, verbose, lists them.
func printTuningRecords(out io.Writer, j *compilecache.Journal, verbose bool) error {
	recs, err := j.AllTuningRecords()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d tuning records (kiln tune)\n", len(recs))
	if verbose {
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "WORKLOAD\tNODE\tSTRATEGY\tKNOBS\tSPEEDUP\tTARGET")
		for _, r := range recs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t×%.2f\t%s\n", r.Workload, r.Label, r.Strategy, r.Knobs, r.Speedup, r.Target)
		}
		w.Flush()
	}
	return nil
}

// resolveKey accepts a whole key or a unique prefix of one.
func resolveKey(open func(*cobra.Command) (*compilecache.Journal, error), cmd *cobra.Command, s string) (compilecache.Key, error) {
	if k, err := compilecache.ParseKey(s); err == nil {
		return k, nil
	}
	j, err := open(cmd)
	if err != nil {
		return compilecache.Key{}, err
	}
	defer j.Close()
	es, err := j.Entries()
	if err != nil {
		return compilecache.Key{}, err
	}
	var found []compilecache.Key
	for _, e := range es {
		if len(s) >= 4 && strings.HasPrefix(e.Key.String(), s) {
			found = append(found, e.Key)
		}
	}
	if len(found) != 1 {
		return compilecache.Key{}, usageError{fmt.Errorf("key %q matches %d entries", s, len(found))}
	}
	return found[0], nil
}
