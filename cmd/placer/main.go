// Command placer is finegrain's central placer. `placer plan` is a dry run on files: it reads an
// HPCJob and a cluster snapshot and prints where the job's workers would go.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/dryrun"
)

const usage = `usage:
  placer plan --job JOB.yaml --cluster SNAPSHOT.yaml [-o json|text]
  placer plan --pod-group NAMESPACE/NAME --cluster SNAPSHOT.yaml [-o json|text]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "plan":
		return plan(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func plan(args []string, stdout, stderr io.Writer) int {
	var opts dryrun.Options
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.JobFile, "job", "", "HPCJob YAML or JSON file")
	fs.StringVar(&opts.PodGroup, "pod-group", "", "plan the plain pod gang NAMESPACE/NAME found in the snapshot")
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
