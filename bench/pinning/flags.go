package main

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
	"github.com/finegrain-dev/finegrain/bench/internal/pinning/pods"
)

// config is the command line: the settings of a run on this machine's cgroups or on a cluster
// (cluster.Options is the former), or the directories of earlier runs to report together.
type config struct {
	onCluster bool
	cluster   pods.Options
	merge     []string
	notes     []string
	verbose   bool
}

func parse(args []string) (config, error) {
	var c config
	o := &c.cluster
	fs := flag.NewFlagSet("pinning", flag.ContinueOnError)
	fs.StringVar(&o.Worker, "worker", "bin/fgworker", "fgworker binary for the ranks and the neighbour (this machine's cgroups)")
	scenarios := fs.String("scenarios", strings.Join(pinning.AllScenarios, ","), "comma-separated scenarios (alone is required)")
	benchmarks := fs.String("benchmarks", strings.Join(pinning.AllBenchmarks, ","), "comma-separated benchmarks")
	fs.IntVar(&o.Repeats, "repeats", 5, "runs of every scenario and benchmark")
	fs.IntVar(&o.Ranks, "ranks", 0, "ranks per scenario (0: cores of the first NUMA node less one)")
	fs.IntVar(&o.N, "n", 2048, "DGEMM matrix order")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "DGEMM time per run")
	fs.IntVar(&o.ArrayLen, "array", 0, "STREAM elements per array (0: four times the last-level caches)")
	fs.IntVar(&o.NTimes, "ntimes", 20, "STREAM passes per run")
	fs.IntVar(&o.NoiseThreads, "noise-threads", runtime.NumCPU(), "neighbour threads")
	fs.IntVar(&o.NoiseMiB, "noise-mib", 512, "MiB the neighbour streams over")
	fs.Float64Var(&o.NoiseCPUs, "noise-cpus", 1, "the neighbour's CPU limit, enforced as a CFS quota in every scenario (0: none)")
	fs.DurationVar(&o.NoiseWarmup, "noise-warmup", time.Second, "how long the neighbour runs before the ranks start")
	fs.StringVar(&o.SysfsRoot, "sysfs", "/sys", "sysfs root")
	fs.StringVar(&o.ProcRoot, "proc", "/proc", "procfs root")
	fs.StringVar(&o.Mountinfo, "mountinfo", "/proc/self/mountinfo", "mount table to find the cgroup hierarchies in")
	fs.StringVar(&o.OutDir, "out", "_output/pinning", "directory for pinning.md, pinning.json, samples.json, context.json and the plots")
	fs.StringVar(&o.Output, "o", "table", "stdout: table (markdown) or json (rows)")

	fs.BoolVar(&c.onCluster, "on-cluster", false, "run the scenarios as pods on the Kubernetes node this program runs on")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "/var/lib/finegrain-cluster/admin.kubeconfig", "-on-cluster: admin kubeconfig")
	fs.StringVar(&o.Kubectl, "kubectl", "kubectl", "-on-cluster: kubectl, to deploy the node agent when it is not deployed")
	fs.StringVar(&o.Overlay, "overlay", "hack/cluster/overlay", "-on-cluster: kustomization that deploys the node agent")
	fs.StringVar(&o.Node, "node", "", "-on-cluster: this node's name (default: the cluster's only node)")
	fs.StringVar(&o.Image, "image", "localhost/finegrain-worker:dev", "-on-cluster: image holding fgworker, never pulled")
	fs.StringVar(&o.KubeletRoot, "kubelet-root", "/var/lib/finegrain-cluster/kubelet", "-on-cluster: the kubelet's root directory (its pod-resources API tells its CPU manager policy)")
	fs.StringVar(&o.AgentNamespace, "agent-namespace", "finegrain-system", "-on-cluster: namespace of the node agent's DaemonSet")
	fs.StringVar(&o.AgentName, "agent-daemonset", "finegrain-nodeagent", "-on-cluster: name of the node agent's DaemonSet")
	fs.DurationVar(&o.StartLead, "start-lead", 15*time.Second, "-on-cluster: time from creating the worker pods to their ranks' common start")
	fs.DurationVar(&o.PodTimeout, "pod-timeout", 3*time.Minute, "-on-cluster: limit for a pod to start, finish after the start, or go, and for the agent to come or go")
	merge := fs.String("merge", "", "comma-separated output directories of earlier runs: report their samples together and run nothing")
	fs.Func("note", "a line for the report, e.g. why a scenario did not run (repeatable)", func(s string) error {
		c.notes = append(c.notes, s)
		return nil
	})
	fs.BoolVar(&c.verbose, "v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Scenarios, o.Benchmarks, c.merge = split(*scenarios), split(*benchmarks), split(*merge)
	switch {
	case len(c.merge) > 0 && c.onCluster:
		return c, fmt.Errorf("-merge reports earlier runs and runs nothing: leave out -on-cluster")
	case len(c.merge) > 0:
		return c, o.Options.ValidateSettings()
	case c.onCluster:
		return c, o.Validate()
	}
	return c, o.Options.Validate()
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
