package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/checkpoint"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// pinsLong is the help text of `nodeagent pins`.
const pinsLong = `Prints who holds which CPUs on this node: every pinned container's exclusive CPUs, memory node
and NUMA node, the containers in the shared pool and the shared pool itself, and each NUMA node's
free CPUs, free whole cores and what one exclusive request could still get there.
By default it asks the running node agent's inspection endpoint (URL, GET /pins). With
--checkpoint it reads the agent's state file instead, for a node whose agent is not running: the
file names pods by UID only, DIR is the machine it was written on, and N and --allow-split-cores
must be the agent's settings for "available" to match. The JSON form is a public contract
(docs/interfaces.md).

  nodeagent pins [--endpoint URL] [-o table|json]
  nodeagent pins --checkpoint FILE [--sysfs-root DIR] [--min-shared-cpus N] [--allow-split-cores] [-o table|json]
  nodeagent pins --processes [--pod NAMESPACE/NAME]... [--endpoint URL] [-o table|json]

With --processes it prints what runs in the pinned containers instead (GET /processes): every
process the agent finds in their cgroups, with its PID on the host, its MPI rank where its
environment names one (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK), its name and the CPUs and
memory nodes it may use. --pod (repeatable) keeps the containers of those pods. The agent reads
a bounded number of processes per container and per listing (the table's first line says how
many); a container with more shows how many it holds.`

// pinsOptions are the parsed flags of `nodeagent pins`.
type pinsOptions struct {
	endpoint        string
	checkpoint      string
	sysfsRoot       string
	minSharedCPUs   int
	allowSplitCores bool
	timeout         time.Duration
	output          outputFormat
	processes       bool
	pods            podList
}

// podList is the value of the repeatable --pod flag.
type podList []types.NamespacedName

func (l *podList) String() string {
	names := make([]string, len(*l))
	for i, p := range *l {
		names[i] = p.String()
	}
	return strings.Join(names, ",")
}

func (l *podList) Set(v string) error {
	p, err := inspect.ParsePodName(v)
	if err != nil {
		return err
	}
	*l = append(*l, p)
	return nil
}

// Type names the value in the usage text.
func (l *podList) Type() string { return "pod" }

// newPinsCommand is `nodeagent pins`.
func newPinsCommand() *cobra.Command {
	var opts pinsOptions
	cmd := &cobra.Command{
		Use:   "pins [flags]",
		Short: "show exclusive and shared CPUs per container and free cores per NUMA node (table or JSON)",
		Long:  pinsLong,
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPinsFlags(cmd.Flags(), opts); err != nil {
				return cli.Usage(err)
			}
			if opts.processes {
				return printProcesses(opts, cmd.OutOrStdout())
			}
			return printPins(opts, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.endpoint, "endpoint", "http://"+inspect.DefaultAddress, "the node agent's inspection endpoint `URL`")
	fs.StringVar(&opts.checkpoint, "checkpoint", "", "read the agent's checkpoint `FILE` instead of asking the agent")
	fs.StringVar(&opts.sysfsRoot, "sysfs-root", "/sys", "with --checkpoint: `DIR` laid out like /sys describing the machine")
	fs.IntVar(&opts.minSharedCPUs, "min-shared-cpus", 1, "with --checkpoint: the agent's minimum shared pool, in `N` CPUs")
	fs.BoolVar(&opts.allowSplitCores, "allow-split-cores", false, "with --checkpoint: the agent lets requests split physical cores")
	fs.DurationVar(&opts.timeout, "timeout", 5*time.Second, "how long to wait for the endpoint")
	fs.BoolVar(&opts.processes, "processes", false, "print the processes in the pinned containers instead (PID, MPI rank, allowed CPUs and memory nodes)")
	fs.Var(&opts.pods, "pod", "with --processes: only the pinned containers of this pod, as `NAMESPACE/NAME` (repeatable)")
	addOutputFlag(fs, &opts.output, outputTable)
	return cmd
}

// checkPinsFlags refuses combinations of flags that do not go together.
func checkPinsFlags(fs *pflag.FlagSet, opts pinsOptions) error {
	if fs.Changed("endpoint") && fs.Changed("checkpoint") {
		return errors.New("--endpoint and --checkpoint exclude each other: ask the agent, or read its file")
	}
	if fs.Changed("pod") && !opts.processes {
		return errors.New("--pod only applies with --processes")
	}
	if opts.processes && opts.checkpoint != "" {
		return errors.New("--processes asks the running agent; a checkpoint holds no processes")
	}
	if opts.checkpoint == "" {
		for _, name := range []string{"sysfs-root", "min-shared-cpus", "allow-split-cores"} {
			if fs.Changed(name) {
				return fmt.Errorf("--%s only applies with --checkpoint", name)
			}
		}
	}
	if opts.minSharedCPUs < 1 {
		return fmt.Errorf("--min-shared-cpus %d: the agent keeps at least 1", opts.minSharedCPUs)
	}
	return nil
}

// printPins prints the agent's view, or the checkpoint's; an error means neither could be read
// or the output could not be written.
func printPins(opts pinsOptions, stdout io.Writer) error {
	var view inspect.Pins
	var err error
	if opts.checkpoint != "" {
		view, err = pinsFromCheckpoint(opts)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
		view, err = inspect.Fetch(ctx, &http.Client{}, opts.endpoint)
		cancel()
		if err != nil {
			err = fmt.Errorf("%w\n%s; or read its state with --checkpoint)", err, notRunningHint)
		}
	}
	if err != nil {
		return err
	}
	err = writeOutput(stdout, opts.output, view, func(w io.Writer) error { return inspect.WriteTable(w, view, time.Now()) })
	if err != nil {
		return fmt.Errorf("write the output: %w", err)
	}
	return nil
}

// notRunningHint follows a failure to reach the agent.
const notRunningHint = "(is the node agent running here? Its --inspect-address must match --endpoint"

// printProcesses is `pins --processes`; an error means the agent could not answer or the output
// could not be written.
func printProcesses(opts pinsOptions, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	view, err := inspect.FetchProcesses(ctx, &http.Client{}, opts.endpoint, opts.pods)
	if err != nil {
		return fmt.Errorf("--processes: %w\n%s)", err, notRunningHint)
	}
	err = writeOutput(stdout, opts.output, view, func(w io.Writer) error { return writeProcessesTable(w, view) })
	if err != nil {
		return fmt.Errorf("--processes: write the output: %w", err)
	}
	return nil
}

// writeProcessesTable prints the listing under a line naming the node and the bounds.
func writeProcessesTable(w io.Writer, v inspect.Processes) error {
	_, err := fmt.Fprintf(w, "Node %s: processes of %d pinned containers (the agent reads at most %d per container, %d in all)\n\n",
		v.Node, len(v.Containers), v.PerContainer, v.PerListing)
	if err != nil {
		return err
	}
	return inspect.WriteProcessesTable(w, v.Containers)
}

// pinsFromCheckpoint rebuilds the allocator's state from a checkpoint file on the machine the
// file was written for. Every entry must restore: one that does not is reported, not dropped.
func pinsFromCheckpoint(opts pinsOptions) (inspect.Pins, error) {
	file, err := checkpoint.New(opts.checkpoint)
	if err != nil {
		return inspect.Pins{}, err
	}
	data, err := file.Read()
	if err != nil {
		return inspect.Pins{}, err
	}
	cp, err := policy.DecodeCheckpoint(data)
	if err != nil {
		return inspect.Pins{}, fmt.Errorf("checkpoint %s: %w", opts.checkpoint, err)
	}
	topo, err := topology.Discover(opts.sysfsRoot)
	if err != nil {
		return inspect.Pins{}, fmt.Errorf("read the machine under %s: %w", opts.sysfsRoot, err)
	}
	if fp := policy.Fingerprint(topo); fp != cp.Topology {
		return inspect.Pins{}, fmt.Errorf("checkpoint %s was written for machine %s, but %s describes machine %s; pass the --sysfs-root of the machine it comes from",
			opts.checkpoint, cp.Topology, opts.sysfsRoot, fp)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cp.Reserved, MinSharedCPUs: opts.minSharedCPUs})
	if err != nil {
		return inspect.Pins{}, fmt.Errorf("checkpoint %s: %w", opts.checkpoint, err)
	}
	var bad []error
	for _, asg := range cp.Assignments {
		if err := a.Restore(asg); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return inspect.Pins{}, fmt.Errorf("checkpoint %s holds %d entries that do not fit the machine (the agent repairs these at start): %w", opts.checkpoint, len(bad), errors.Join(bad...))
	}
	return inspect.FromSnapshot(cp.Host, inspect.SourceCheckpoint, report.SnapshotOf(a, 0, nil), report.Options{WholeCores: !opts.allowSplitCores}), nil
}
