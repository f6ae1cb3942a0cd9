package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/dryrun"
)

// planLong is the help text of `placer plan`.
const planLong = `Plans an HPCJob (--job), or a plain pod gang found in the snapshot (--pod-group), on a cluster
snapshot file with the placer's own planner and prints where each worker would go (node, NUMA
node, cores), or why it fits nowhere. Nothing is written to a cluster. The snapshot is the output
of kubectl get nodes,noderesourcetopologies,pods,hpcjobs -A -o yaml. The JSON form is a public contract
(docs/placer.md); the exit status is 1 when the job is invalid or does not fit.`

// newPlanCommand is `placer plan`.
func newPlanCommand() *cobra.Command {
	var opts dryrun.Options
	taskGroups := true
	cmd := &cobra.Command{
		Use:                   "plan (--job JOB.yaml | --pod-group NAMESPACE/NAME) --cluster SNAPSHOT.yaml [-o json|text]",
		Short:                 "plan an HPCJob or a pod group on a cluster snapshot file and print the placements",
		Long:                  planLong,
		Args:                  cli.NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Output != "json" && opts.Output != "text" {
				return cli.Usagef("--output %q: want json or text", opts.Output)
			}
			opts.NoTaskGroups = !taskGroups
			out, warnings, err := dryrun.Plan(opts)
			if werr := dryrun.Write(cmd.OutOrStdout(), opts.Output, out, warnings, err); werr != nil {
				return fmt.Errorf("write the plan: %w", werr)
			}
			if err != nil {
				return cli.ErrReported // the output says why
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.JobFile, "job", "", "HPCJob YAML or JSON `FILE`")
	fs.StringVar(&opts.PodGroup, "pod-group", "", "plan the plain pod gang `NAMESPACE/NAME` found in the snapshot instead")
	fs.StringVar(&opts.ClusterFile, "cluster", "", "snapshot `FILE`: the output of kubectl get nodes,noderesourcetopologies,pods,hpcjobs -A -o yaml")
	fs.StringVarP(&opts.Output, "output", "o", "json", "output format: json or text")
	fs.StringVar(&opts.SchedulerName, "scheduler-name", v1alpha1.DefaultSchedulerName, "schedulerName of the job's pods")
	fs.BoolVar(&taskGroups, "task-groups", true, "plan as a placer run with this --task-groups (false: every node scores alike)")
	return cmd
}
