// Command pinwindow measures, on a real cluster node, how long a pinned worker's container runs
// unpinned: from the moment its cgroup directory appears to the moment its cpuset.cpus holds its
// exclusive CPUs, watched by this program's own inotify recorder, for the node agent's inotify
// path and for the informer path alone (the agent's DaemonSet is re-rolled with each mode's flags
// in the same run, then restored). It also measures how fast the agent repairs a cpuset rewritten
// by hand, and the agent's resident memory and CPU use while idle. Run it as root on the node,
// with an admin kubeconfig, against a cluster where the agent's DaemonSet runs (the local cluster:
// make cluster-up, kubectl apply -k hack/cluster/overlay).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

type options struct {
	target      agentbench.Target
	modes       []mode
	pods        int
	wantCPUs    int
	image       string
	hostNetwork bool
	driftRounds int
	idle        time.Duration
	podTimeout  time.Duration
	jsonOut     string
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := o.target.FlagSet("pinwindow", stderr)
	modes := fs.String("modes", "inotify,informer", "agent modes to measure, in order: inotify (inotify + CRI names) and informer (pod statuses only)")
	fs.IntVar(&o.pods, "pods", 100, "workers pinned one after the other per mode")
	fs.IntVar(&o.wantCPUs, "cpus", 1, "exclusive CPUs per worker")
	fs.StringVar(&o.image, "image", "localhost/finegrain-worker:dev", "workers' image (its entrypoint must idle), never pulled")
	fs.BoolVar(&o.hostNetwork, "host-network", true, "run workers on the host's network (the local cluster has no pod network)")
	fs.IntVar(&o.driftRounds, "drift-rounds", 20, "hand-made cpuset rewrites the agent must repair (0 skips)")
	fs.DurationVar(&o.idle, "idle", time.Minute, "how long to sample the idle agent's CPU time (0 skips)")
	fs.DurationVar(&o.podTimeout, "pod-timeout", time.Minute, "limit for one worker to be pinned or gone")
	fs.StringVar(&o.jsonOut, "json", "", "also write the samples and summaries to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.modes, err = agentbench.ParseModes(*modes, modeInotify, modeInformer); err != nil {
		return o, err
	}
	if o.pods < 1 || o.wantCPUs < 1 {
		return o, fmt.Errorf("-pods %d and -cpus %d must be at least 1", o.pods, o.wantCPUs)
	}
	return o, nil
}

func main() {
	agentbench.Main("pinwindow", parse, run)
}

// run measures the pin window of every mode: it starts the cgroup recorder (startRecorder),
// then for each mode rolls the agent out with it and measures (measureMode), and prints the
// table and writes the JSON.
func run(ctx context.Context, o options, log *slog.Logger) error {
	s, err := agentbench.Open(ctx, o.target, "pinwindow", log)
	if err != nil {
		return err
	}
	defer s.Close()
	mounts, err := cgroup.DetectMounts("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	layout, err := cgroup.NewLayout(mounts, cgroup.Cgroupfs, "")
	if err != nil {
		return err
	}
	rec, stop, err := startRecorder(ctx, layout, log)
	if err != nil {
		return err
	}
	defer stop()
	b := &bench{o: o, client: s.Client, rec: rec, layout: layout, log: log, ns: s.Namespace}
	all, err := onlineCPUs()
	if err != nil {
		return err
	}
	r := result{Command: strings.Join(os.Args, " "), Windows: map[mode]agentbench.Summary{}, Samples: map[mode][]pinSample{},
		AgentWindows: map[mode]agentbench.Summary{}, AgentResolve: map[mode]agentbench.Summary{}}
	for _, m := range o.modes {
		if err := b.measureMode(ctx, s, m, all, &r); err != nil {
			return err
		}
	}
	if err := writeTable(os.Stdout, r, o.modes); err != nil {
		return err
	}
	return agentbench.WriteJSON(o.jsonOut, r)
}

// startRecorder starts the recorder of new container cgroups; stop ends it.
func startRecorder(ctx context.Context, layout cgroup.Layout, log *slog.Logger) (*recorder, func(), error) {
	rec, err := newRecorder(layout)
	if err != nil {
		return nil, nil, err
	}
	recCtx, stopRec := context.WithCancel(ctx)
	recDone := make(chan error, 1)
	go func() { recDone <- rec.run(recCtx) }()
	if err := <-rec.realtime; err != nil {
		log.Warn("the recorder runs without real-time priority: on a busy node it may notice a cgroup late and under-measure its window", "reason", err.Error())
	}
	return rec, func() { stopRec(); <-recDone }, nil
}

// measureMode rolls the agent out in mode m and measures into r: the idle agent (inotify mode),
// the pin windows, the agent's own account of them, and drift repair (inotify mode).
func (b *bench) measureMode(ctx context.Context, s *agentbench.Session, m mode, all cpuset.CPUSet, r *result) error {
	o, log := b.o, b.log
	log.Info("rolling the agent out", "mode", string(m))
	pod, err := s.Agent.SetArgs(ctx, withMode(s.AgentArgs, m, criEndpoint(s.AgentArgs)))
	if err != nil {
		return err
	}
	r.Node = pod.Spec.NodeName
	if node, err := s.Client.CoreV1().Nodes().Get(ctx, r.Node, metav1.GetOptions{}); err == nil {
		r.Runtime = node.Status.NodeInfo.ContainerRuntimeVersion
	}
	if m == modeInotify && o.idle > 0 {
		if err := measureAgentIdle(ctx, b.layout, pod, o.idle, r, log); err != nil {
			return err
		}
	}
	samples, err := b.measureWindows(ctx, m, o.pods)
	r.Samples[m] = samples
	r.Windows[m] = agentbench.Summarize(windowsOf(samples))
	if err != nil {
		return err
	}
	windows, resolves, err := agentPins(ctx, s.Client, pod, string(m))
	if err != nil {
		log.Warn("cannot read the agent's own account of its pins", "reason", err.Error())
	}
	r.AgentWindows[m], r.AgentResolve[m] = agentbench.Summarize(windows), agentbench.Summarize(resolves)
	if m == modeInotify && o.driftRounds > 0 {
		drift, err := b.measureDrift(ctx, o.driftRounds, all)
		if err != nil {
			return err
		}
		r.Drift = agentbench.Summarize(drift)
	}
	return nil
}

// measureAgentIdle lets the freshly started agent settle, then samples it.
func measureAgentIdle(ctx context.Context, layout cgroup.Layout, pod *corev1.Pod, d time.Duration, r *result, log *slog.Logger) error {
	pid, err := agentPID(layout, pod)
	if err != nil {
		return err
	}
	log.Info("sampling the idle agent", "pid", pid, "for", d)
	time.Sleep(5 * time.Second)
	share, rss, err := measureIdle(ctx, pid, d)
	if err != nil {
		return fmt.Errorf("agent usage: %w", err)
	}
	r.IdleCPU, r.RSSBytes, r.IdleFor = share, rss, d
	return nil
}

func windowsOf(ss []pinSample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.Window
	}
	return out
}

func onlineCPUs() (cpuset.CPUSet, error) {
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return cpulist.Parse(string(data))
}
