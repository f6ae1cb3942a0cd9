package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/dryrun"
)

// runPlan is `placer plan --job JOB.yaml --cluster SNAPSHOT.yaml [-o json|text]`.
func runPlan(args []string, stdout, stderr io.Writer) int {
	var opts dryrun.Options
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.JobFile, "job", "", "HPCJob YAML or JSON file")
	fs.StringVar(&opts.PodGroup, "pod-group", "", "plan the plain pod gang NAMESPACE/NAME found in the snapshot instead")
	fs.StringVar(&opts.ClusterFile, "cluster", "", "output of kubectl get nodes,noderesourcetopologies,pods -A -o yaml")
	fs.StringVar(&opts.Output, "o", "json", "output format: json or text")
	fs.StringVar(&opts.SchedulerName, "scheduler-name", v1alpha1.DefaultSchedulerName, "schedulerName of the job's pods")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if opts.Output != "json" && opts.Output != "text" {
		fmt.Fprintf(stderr, "-o %q: want json or text\n", opts.Output)
		return 2
	}
	out, warnings, err := dryrun.Plan(opts)
	if werr := dryrun.Write(stdout, opts.Output, out, warnings, err); werr != nil {
		fmt.Fprintf(stderr, "write plan: %v\n", werr)
		return 2
	}
	if err != nil {
		return 1
	}
	return 0
}
