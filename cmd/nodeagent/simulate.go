package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// simulateLong is the help text of `nodeagent simulate`.
const simulateLong = `Runs exclusive CPU requests and releases, in command-line order, through the node agent's real
allocator on the machine described by DIR (a sysfs tree: /sys, or a captured one) and prints
what each step got, the free CPUs of every NUMA node with CPUs, and the shared pool (CPU lists in
kernel list format). Operators use it to see what a node would give a job before submitting it;
the JSON form is a public contract (docs/interfaces.md).
  --request N     N exclusive CPUs on the NUMA node the allocator chooses
  --request N@K   N exclusive CPUs on NUMA node K
  --release I     release the I-th request (counting requests only, from 0)
A request that does not fit is reported in its step; it is not a failure of the command.`

// simStep is one --request or --release, in command-line order.
type simStep struct {
	release bool
	cpus    int
	numa    policy.NUMAChoice
	index   int
	// text is the flag's value, for the table.
	text string
}

// simulateOptions are the parsed flags of `nodeagent simulate`.
type simulateOptions struct {
	sysfsRoot       string
	reservedCPUs    string
	minSharedCPUs   int
	allowSplitCores bool
	output          outputFormat
	steps           []simStep
}

// simReport is the command's output; its JSON form is a public contract (docs/interfaces.md).
type simReport struct {
	Steps  []simStepResult `json:"steps"`
	Free   []simFree       `json:"free"`
	Shared string          `json:"shared"`
}

type simStepResult struct {
	Request  *int   `json:"request,omitempty"`
	Release  *int   `json:"release,omitempty"`
	CPUs     string `json:"cpus,omitempty"`
	Mems     string `json:"mems,omitempty"`
	NUMANode *int   `json:"numaNode,omitempty"`
	Error    string `json:"error,omitempty"`
	// action is the step as given ("request 8@1"), for the table.
	action string
}

type simFree struct {
	NUMANode int    `json:"numaNode"`
	CPUs     string `json:"cpus"`
}

// newSimulateCommand is `nodeagent simulate`.
func newSimulateCommand() *cobra.Command {
	opts := simulateOptions{}
	requests := 0
	cmd := &cobra.Command{
		Use: "simulate [--sysfs-root DIR] [--reserved-cpus LIST] [--min-shared-cpus N] [--allow-split-cores]\n" +
			"                     [-o table|json] (--request N[@K] | --release I)...",
		Short: "run exclusive CPU requests and releases through the allocator and show what they get",
		Long:  simulateLong,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.Usagef("unexpected argument %q; steps are given with --request and --release", args[0])
			}
			return nil
		},
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(opts, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.sysfsRoot, "sysfs-root", "/sys", "root `DIR` of the sysfs tree describing the machine")
	fs.StringVar(&opts.reservedCPUs, "reserved-cpus", "", "CPUs reserved for the kubelet and system, as a kernel CPU `LIST` (e.g. 0-1)")
	fs.IntVar(&opts.minSharedCPUs, "min-shared-cpus", 1, "smallest size of the shared pool, in `N` CPUs")
	fs.BoolVar(&opts.allowSplitCores, "allow-split-cores", false, "let requests share a physical core (odd requests on SMT machines)")
	addOutputFlag(fs, &opts.output, outputTable)
	fs.Func("request", "request `N[@K]`: N exclusive CPUs, on NUMA node K if given (repeatable)", func(v string) error {
		s, err := parseRequestStep(v)
		if err != nil {
			return err
		}
		opts.steps = append(opts.steps, s)
		requests++
		return nil
	})
	fs.Func("release", "release request `I`, counting requests from 0 (repeatable)", func(v string) error {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			return fmt.Errorf("%q is not a request index (0, 1, ...)", v)
		}
		if i >= requests {
			return fmt.Errorf("release %d names a request that does not come before it (%d requests so far)", i, requests)
		}
		opts.steps = append(opts.steps, simStep{release: true, index: i, text: v})
		return nil
	})
	return cmd
}

// runSimulate runs the steps and prints the report; an error means the machine or the
// configuration cannot be used, or the report cannot be written.
func runSimulate(opts simulateOptions, stdout io.Writer) error {
	topo, err := topology.Discover(opts.sysfsRoot)
	if err != nil {
		return fmt.Errorf("discover the machine under %s: %w", opts.sysfsRoot, err)
	}
	report, err := simulate(topo, opts)
	if err != nil {
		return err
	}
	if err := writeOutput(stdout, opts.output, report, func(w io.Writer) error { return writeSimTable(w, report) }); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

func parseRequestStep(v string) (simStep, error) {
	count, node, onNode := strings.Cut(v, "@")
	n, err := strconv.Atoi(count)
	if err != nil {
		return simStep{}, fmt.Errorf("request %q: %q is not a number of CPUs", v, count)
	}
	s := simStep{cpus: n, text: v}
	if onNode {
		k, err := strconv.Atoi(node)
		if err != nil || k < 0 {
			return simStep{}, fmt.Errorf("request %q: %q is not a NUMA node number", v, node)
		}
		s.numa = policy.OnNUMANode(topology.NUMAID(k))
	}
	return s, nil
}

// simulate runs the steps through a fresh allocator on topo.
func simulate(topo *topology.Topology, opts simulateOptions) (simReport, error) {
	reserved, err := cpulist.Parse(opts.reservedCPUs)
	if err != nil {
		return simReport{}, fmt.Errorf("--reserved-cpus: %w", err)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: reserved, MinSharedCPUs: opts.minSharedCPUs})
	if err != nil {
		return simReport{}, err
	}
	report := simReport{Steps: []simStepResult{}, Free: []simFree{}}
	var keys []policy.Key // by request index; zero Key when the request was refused
	for _, s := range opts.steps {
		if s.release {
			res := releaseStep(a, keys, s.index)
			res.action = "release " + s.text
			report.Steps = append(report.Steps, res)
			continue
		}
		key := policy.Key{PodUID: fmt.Sprintf("simulate-%d", len(keys)), Container: "request"}
		res := simStepResult{Request: ptr(s.cpus), action: "request " + s.text}
		asg, err := a.Allocate(policy.Request{Key: key, CPUs: s.cpus, NUMANode: s.numa, AllowSplitCores: opts.allowSplitCores})
		if err != nil {
			res.Error = err.Error()
			key = policy.Key{}
		} else {
			res.CPUs, res.Mems, res.NUMANode = asg.CPUs.String(), asg.Mems.String(), ptr(int(asg.NUMANode))
		}
		keys = append(keys, key)
		report.Steps = append(report.Steps, res)
	}
	for _, f := range a.Free() {
		if f.Capacity > 0 {
			report.Free = append(report.Free, simFree{NUMANode: int(f.NUMANode), CPUs: f.FreeCPUs.String()})
		}
	}
	report.Shared = a.SharedCPUs().String()
	return report, nil
}

func releaseStep(a *policy.Allocator, keys []policy.Key, i int) simStepResult {
	res := simStepResult{Release: ptr(i)}
	if keys[i] == (policy.Key{}) {
		res.Error = fmt.Sprintf("request %d was not granted; there is nothing to release", i)
	} else if _, ok := a.Release(keys[i]); !ok {
		res.Error = fmt.Sprintf("request %d was already released", i)
	}
	return res
}

func ptr(v int) *int { return &v }

func writeSimTable(w io.Writer, r simReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tACTION\tRESULT")
	for i, s := range r.Steps {
		result := "released"
		switch {
		case s.Error != "":
			result = "error: " + s.Error
		case s.NUMANode != nil:
			result = fmt.Sprintf("cpus %s mems %s (NUMA node %d)", s.CPUs, s.Mems, *s.NUMANode)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", i, s.action, result)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NUMA NODE\tFREE CPUS")
	for _, f := range r.Free {
		fmt.Fprintf(tw, "%d\t%s\n", f.NUMANode, orNone(f.CPUs))
	}
	fmt.Fprintf(tw, "\nSHARED\t%s\n", orNone(r.Shared))
	return tw.Flush()
}

func orNone(list string) string {
	if list == "" {
		return "(none)"
	}
	return list
}
