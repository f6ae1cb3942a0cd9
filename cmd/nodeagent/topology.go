package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/finegrain-dev/finegrain/pkg/topology"
)

const topologyUsage = `usage: nodeagent topology [--sysfs-root DIR] [-o table|json]

Prints the machine as finegrain schedules onto it: sockets, NUMA nodes with their memory and
distances, L3 groups, and cores with their hardware threads, plus offline and isolated CPUs.
DIR is a directory laid out like /sys (it contains devices/system/cpu): the host's /sys, or a tree
captured with hack/capture-sysfs.sh. The JSON form is a public contract (docs/interfaces.md).
`

// topologyOptions are the parsed flags of `nodeagent topology`.
type topologyOptions struct {
	sysfsRoot string
	output    outputFormat
}

func parseTopologyFlags(args []string, stderr io.Writer) (topologyOptions, error) {
	var opts topologyOptions
	fs := flag.NewFlagSet("topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, topologyUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.sysfsRoot, "sysfs-root", "/sys", "directory laid out like /sys to read the machine from")
	addOutputFlag(fs, &opts.output, outputTable)
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return opts, nil
}

// runTopology is the `topology` subcommand: 0 on success, 1 when the sysfs tree cannot be read,
// 2 on a usage error.
func runTopology(args []string, stdout, stderr io.Writer) int {
	opts, err := parseTopologyFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "nodeagent topology: %v\n", err)
		}
		return 2
	}
	topo, err := topology.Discover(opts.sysfsRoot)
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent topology: cannot read the machine under %s: %v\n"+
			"(--sysfs-root must be a directory laid out like /sys; hack/capture-sysfs.sh makes one)\n", opts.sysfsRoot, err)
		return 1
	}
	err = writeOutput(stdout, opts.output, topo.View(), func(w io.Writer) error { return topology.WriteTable(w, topo) })
	if err != nil {
		fmt.Fprintf(stderr, "nodeagent topology: write the output: %v\n", err)
		return 1
	}
	return 0
}
