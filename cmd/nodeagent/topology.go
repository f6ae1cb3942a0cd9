package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// topologyLong is the help text of `nodeagent topology`.
const topologyLong = `Prints the machine as finegrain schedules onto it: sockets, NUMA nodes with their memory and
distances, L3 groups, and cores with their hardware threads, plus offline and isolated CPUs.
DIR is a directory laid out like /sys (it contains devices/system/cpu): the host's /sys, or a tree
captured with hack/capture-sysfs.sh. The JSON form is a public contract (docs/interfaces.md).`

// topologyOptions are the parsed flags of `nodeagent topology`.
type topologyOptions struct {
	sysfsRoot string
	output    outputFormat
}

// newTopologyCommand is `nodeagent topology`.
func newTopologyCommand() *cobra.Command {
	var opts topologyOptions
	cmd := &cobra.Command{
		Use:                   "topology [--sysfs-root DIR] [-o table|json]",
		Short:                 "print the machine's sockets, NUMA nodes, L3 groups and cores (table or JSON)",
		Long:                  topologyLong,
		Args:                  cli.NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTopology(opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.sysfsRoot, "sysfs-root", "/sys", "`DIR` laid out like /sys to read the machine from")
	addOutputFlag(cmd.Flags(), &opts.output, outputTable)
	return cmd
}

// runTopology prints the machine; an error means the sysfs tree cannot be read or the output
// cannot be written.
func runTopology(opts topologyOptions, stdout io.Writer) error {
	topo, err := topology.Discover(opts.sysfsRoot)
	if err != nil {
		return fmt.Errorf("cannot read the machine under %s: %w\n"+
			"(--sysfs-root must be a directory laid out like /sys; hack/capture-sysfs.sh makes one)", opts.sysfsRoot, err)
	}
	err = writeOutput(stdout, opts.output, topo.View(), func(w io.Writer) error { return topology.WriteTable(w, topo) })
	if err != nil {
		return fmt.Errorf("write the output: %w", err)
	}
	return nil
}
