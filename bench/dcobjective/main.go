// Command dcobjective is make bench-dc-objective's driver (issue 20): on the running local
// cluster, with finegrain deployed and the resource metrics API served, it puts the same load
// trace on the same CPU-bound service (bench/cpuservice, a Deployment made afresh per arm)
// under three arms — none (no autoscaler), hpa (a HorizontalPodAutoscaler on CPU utilisation)
// and finegrain (a ServiceObjective with a p99 target, acted on by the placer's loop) — while at
// a fixed point of the trace an HPCJob takes a pinned core of the service's node. It measures per
// arm the seconds whose p99 exceeds the target (loadgen's series), the CPU-seconds the service's
// pods used (their cgroups on the node) and the size changes, and writes result.json and
// result.png. bench/dcobjective/run.sh brings the cluster up and tears it down around it.
//
//	dcobjective -kubeconfig /var/lib/finegrain-cluster/admin.kubeconfig \
//	  -cgroup-roots node-1=/finegrain-nodes/node-1,node-2=/finegrain-nodes/node-2 -out _output/dc-objective
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/bench/servicerun"
	"github.com/finegrain-dev/finegrain/internal/loadgen"
)

const (
	armNone      = "none"
	armHPA       = "hpa"
	armFinegrain = "finegrain"
)

// defaultTrace rises, holds a plateau (during which the HPC job arrives), drops and stays low
// for two minutes, so that both autoscalers' scale-down — a minute of stabilisation after the
// plateau's last violation or high recommendation — falls within it: 4 minutes 40 seconds.
const defaultTrace = "20s@40,20s@80,20s@120,80s@160,20s@80,120s@40"

type options struct {
	kubeconfig  string
	cgroupRoots map[string]string
	cgroupFS    string
	out         string
	arms        []string
	trace       loadgen.Trace
	target      time.Duration
	hpcAt       time.Duration
	work        int
	podCPU      resource.Quantity
	maxPodCPU   resource.Quantity
	maxReplicas int32
	hpaTarget   int32
	period      int32
	stabilize   time.Duration
	readyWait   time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("dcobjective", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "/var/lib/finegrain-cluster/admin.kubeconfig", "kubeconfig of the local cluster")
	roots := fs.String("cgroup-roots", "", "NODE=CGROUP_ROOT,... : each node's kubelet cgroupRoot (hack/cluster's NODE_NAMES and NODE_CGROUP_ROOTS); required")
	fs.StringVar(&o.cgroupFS, "cgroup-fs", "/sys/fs/cgroup", "where the cgroup hierarchies are mounted")
	fs.StringVar(&o.out, "out", "_output/dc-objective", "directory for result.json and result.png")
	arms := fs.String("arms", "none,hpa,finegrain", "arms to run, in order")
	traceFlag := fs.String("trace", defaultTrace, "load trace: DURATION@RATE steps in requests per second")
	fs.DurationVar(&o.target, "target", 50*time.Millisecond, "the p99 latency target")
	fs.DurationVar(&o.hpcAt, "hpc-at", 70*time.Second, "when, from the load's start, the HPCJob taking a pinned core arrives")
	fs.IntVar(&o.work, "work", 2000, "cpuservice -work: SHA-256 hashes of 4 KiB per request")
	podCPU := fs.String("pod-cpu", "500m", "the Deployment's CPU request and limit per pod (none and hpa keep it; finegrain starts from it)")
	maxPodCPU := fs.String("max-pod-cpu", "900m", "finegrain's most CPU per pod (on the local cluster's 2-CPU nodes, 900m leaves the HPC job's core free beside one pod)")
	maxReplicas := fs.Int("max-replicas", 3, "the most replicas hpa and finegrain may run")
	hpaTarget := fs.Int("hpa-utilization", 60, "the HPA's target average CPU utilisation, percent of the request")
	period := fs.Int("period", 10, "the ServiceObjective's periodSeconds")
	fs.DurationVar(&o.stabilize, "scale-down-stabilization", time.Minute, "both autoscalers' scale-down stabilisation: the HPA's behavior.scaleDown.stabilizationWindowSeconds and the ServiceObjective's scaleDownStabilizationSeconds (whole seconds, 1s to 1h)")
	fs.DurationVar(&o.readyWait, "ready-timeout", 2*time.Minute, "how long an arm's set-up may take")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.cgroupRoots, err = parseRoots(*roots); err != nil {
		return o, err
	}
	if o.trace, err = loadgen.ParseTrace(*traceFlag); err != nil {
		return o, fmt.Errorf("-trace: %w", err)
	}
	if o.podCPU, err = resource.ParseQuantity(*podCPU); err != nil || o.podCPU.MilliValue() < 10 {
		return o, fmt.Errorf("-pod-cpu %q: want a CPU quantity of at least 10m, e.g. 500m", *podCPU)
	}
	if o.maxPodCPU, err = resource.ParseQuantity(*maxPodCPU); err != nil || o.maxPodCPU.MilliValue() < 250 {
		return o, fmt.Errorf("-max-pod-cpu %q: want a CPU quantity of at least 250m (the objective's minimum)", *maxPodCPU)
	}
	seen := map[string]bool{}
	for _, a := range strings.Split(*arms, ",") {
		if a != armNone && a != armHPA && a != armFinegrain {
			return o, fmt.Errorf("-arms: %q is no arm; use none, hpa, finegrain", a)
		}
		if seen[a] {
			return o, fmt.Errorf("-arms: %s twice", a)
		}
		seen[a] = true
		o.arms = append(o.arms, a)
	}
	switch {
	case o.target <= 0:
		return o, errors.New("-target must be positive")
	case o.hpcAt < 0 || o.hpcAt >= o.trace.Duration():
		return o, fmt.Errorf("-hpc-at %s: want a time within the trace (%s)", o.hpcAt, o.trace.Duration())
	case o.work < 1:
		return o, errors.New("-work must be positive")
	case *maxReplicas < 1 || *maxReplicas > 20:
		return o, fmt.Errorf("-max-replicas %d: want 1 to 20", *maxReplicas)
	case *hpaTarget < 1 || *hpaTarget > 100:
		return o, fmt.Errorf("-hpa-utilization %d: want 1 to 100", *hpaTarget)
	case *period < 1 || *period > 3600:
		return o, fmt.Errorf("-period %d: want 1 to 3600 seconds", *period)
	case o.stabilize < time.Second || o.stabilize > time.Hour || o.stabilize%time.Second != 0:
		return o, fmt.Errorf("-scale-down-stabilization %s: want whole seconds from 1s to 1h (the HPA's limit)", o.stabilize)
	}
	o.maxReplicas, o.hpaTarget, o.period = int32(*maxReplicas), int32(*hpaTarget), int32(*period)
	return o, nil
}

// parseRoots reads NODE=ROOT,... into a map of node name to cgroupRoot without slashes around it.
func parseRoots(s string) (map[string]string, error) {
	if s == "" {
		return nil, errors.New("-cgroup-roots is required: NODE=CGROUP_ROOT for every node (run.sh passes the cluster's)")
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		node, root, ok := strings.Cut(kv, "=")
		root = strings.Trim(root, "/")
		if !ok || node == "" || strings.Contains(root, "..") {
			return nil, fmt.Errorf("-cgroup-roots: %q is not NODE=CGROUP_ROOT", kv)
		}
		m[node] = root
	}
	return m, nil
}

func run(ctx context.Context, o options, stderr io.Writer) error {
	b, err := newBench(o, stderr)
	if err != nil {
		return err
	}
	res := &Result{Setup: Setup{
		Trace: o.trace, TargetSeconds: o.target.Seconds(), HPCJobAtSeconds: o.hpcAt.Seconds(),
		Work: o.work, PodCPU: o.podCPU.String(), MaxPodCPU: o.maxPodCPU.String(), MaxReplicas: o.maxReplicas, Nodes: b.nodes,
		HPAUtilization: o.hpaTarget, PeriodSeconds: o.period, ScaleDownStabilizationSeconds: int32(o.stabilize / time.Second),
	}}
	var failed []string
	for _, name := range o.arms {
		fmt.Fprintf(stderr, "dcobjective: arm %s\n", name)
		m, err := b.runArm(ctx, name)
		a := &Arm{Measured: m}
		if err != nil {
			a = &Arm{Error: err.Error()}
			failed = append(failed, name+": "+err.Error())
			fmt.Fprintf(stderr, "dcobjective: arm %s failed: %v\n", name, err)
		} else {
			fmt.Fprintf(stderr, "dcobjective: arm %s: %d violation seconds, %.1f CPU-seconds (%.1f granted), %d resizes (p99 %.1f ms, %d requests, %d errors)\n",
				name, m.ViolationSeconds, m.CPUSeconds, m.CPUSecondsGranted, m.Resizes, m.P99Seconds*1e3, m.Requests, m.Errors)
		}
		if err := res.set(name, a); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := writeResult(o.out, res); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d arm(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return ctx.Err()
}

// writeResult writes result.json and result.png into dir.
func writeResult(dir string, res *Result) error {
	return servicerun.Save(dir, "result", res, res.plot)
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcobjective:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dcobjective:", err)
		os.Exit(1)
	}
}
