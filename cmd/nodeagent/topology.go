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
distances, L3 groups, and cores with their hardware threads, plus offline and isolated CPUs; then
what lstopo and numactl -H show besides: every cache level (L1d, L1i, L2, L3), each NUMA node's
size and free memory, the node distance matrix, and the network, GPU, accelerator and storage
PCI devices by NUMA node with their network interfaces.
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
		Short:                 "print the machine's sockets, NUMA nodes, caches, cores, memory and PCI devices (table or JSON)",
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
	hw, err := topology.ReadHardware(opts.sysfsRoot, topo)
	if err != nil {
		return fmt.Errorf("cannot read the caches, memory or PCI devices under %s: %w", opts.sysfsRoot, err)
	}
	view := topology.HostView{View: topo.View(), HardwareView: hw.View()}
	err = writeOutput(stdout, opts.output, view, func(w io.Writer) error {
		if err := topology.WriteTable(w, topo); err != nil {
			return err
		}
		return topology.WriteHardwareTable(w, topo, hw)
	})
	if err != nil {
		return fmt.Errorf("write the output: %w", err)
	}
	return nil
}
