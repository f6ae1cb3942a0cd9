package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/stream"
	"github.com/finegrain-dev/finegrain/internal/observe"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Measurement is what a run on the cluster found.
type Measurement struct {
	Samples []pinning.Sample
	// Ranks per scenario; Policy is the kubelet's CPU manager policy; Scenarios are those that
	// ran, Notes say which were left out and why.
	Ranks     int
	Policy    string
	Scenarios []string
	Notes     []string
}

// runner holds what every scenario of a run shares.
type runner struct {
	o      Options
	kube   *kube
	agent  *agentControl
	node   string // the node's kubernetes.io/hostname label
	online cpuset.CPUSet
	ranks  int
	log    *slog.Logger
}

// Measure runs o.Scenarios as pods on the node, o.Repeats times, and restores the node agent
// as it found it. It must run on that node: the ranks' default count and STREAM's array size
// come from this machine's sysfs, the kubelet's policy from its checkpoint. Its steps:
//  1. find the node, the kubelet's CPU manager policy and the machine, and keep the scenarios
//     the node can run (survey);
//  2. take control of the node agent and make the bench's namespace, both undone at the end;
//  3. run every benchmark of every scenario, repeat by repeat (runAll).
func Measure(ctx context.Context, o Options, log *slog.Logger) (m Measurement, err error) {
	if err := o.Validate(); err != nil {
		return m, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return m, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return m, err
	}
	node, online, err := survey(ctx, client, &o, &m, log)
	if err != nil {
		return m, err
	}
	hostname := node.Labels[corev1.LabelHostname]
	if hostname == "" {
		return m, fmt.Errorf("node %s has no %s label to bind the bench's pods with", node.Name, corev1.LabelHostname)
	}
	agent, err := newAgentControl(ctx, agentControl{client: client, ns: o.AgentNamespace, name: o.AgentName, node: node.Name,
		kubectl: []string{o.Kubectl, "--kubeconfig", o.Kubeconfig}, overlay: o.Overlay, timeout: o.PodTimeout, log: log})
	if err != nil {
		return m, err
	}
	// Clean-up must happen even when ctx was cancelled (Ctrl-C).
	cleanup := context.WithoutCancel(ctx)
	defer func() { err = errors.Join(err, agent.restore(cleanup)) }()
	k, err := newNamespace(ctx, client, o.PodTimeout, log)
	if err != nil {
		return m, err
	}
	defer func() { err = errors.Join(err, k.close(cleanup, o.PodTimeout)) }()
	r := &runner{o: o, kube: k, agent: agent, node: hostname, online: online, ranks: m.Ranks, log: log}
	log.Info("bench on the cluster", "node", node.Name, "policy", m.Policy, "ranks", m.Ranks, "scenarios", m.Scenarios, "namespace", k.ns)
	return m, r.runAll(ctx, &m)
}

// survey finds the node, the kubelet's CPU manager policy and the machine's topology, and sets
// what follows from them in m (policy, ranks, the scenarios kept and why others were not) and
// o (STREAM's array size). It returns the node and its online CPUs.
func survey(ctx context.Context, client kubernetes.Interface, o *Options, m *Measurement, log *slog.Logger) (*corev1.Node, cpuset.CPUSet, error) {
	node, err := findNode(ctx, client, o.Node)
	if err != nil {
		return nil, cpuset.CPUSet{}, err
	}
	kubelet, err := kubeletpolicy.Dial(o.KubeletRoot, 5*time.Second)
	if err != nil {
		return nil, cpuset.CPUSet{}, err
	}
	defer kubelet.Close()
	policy, err := kubelet.Check(ctx)
	if err != nil {
		return nil, cpuset.CPUSet{}, err
	}
	m.Policy = policy.Policy
	topo, err := topology.Discover(o.SysfsRoot)
	if err != nil {
		return nil, cpuset.CPUSet{}, err
	}
	m.Ranks = o.Ranks
	if m.Ranks == 0 {
		m.Ranks = pinning.DefaultRanks(topo)
	}
	m.Scenarios, m.Notes = runnable(o.Scenarios, m.Policy, m.Ranks, topo.OnlineCPUs.Size())
	for _, n := range m.Notes {
		log.Warn("scenario left out", "reason", n)
	}
	if o.ArrayLen == 0 && slices.Contains(o.Benchmarks, result.BenchSTREAM) {
		if o.ArrayLen, err = stream.DefaultLen(o.SysfsRoot); err != nil {
			return nil, cpuset.CPUSet{}, err
		}
	}
	return node, topo.OnlineCPUs, nil
}

// runAll runs every benchmark of every kept scenario, repeat by repeat, switching the node agent
// on or off as each scenario needs, and adds the samples to m.
func (r *runner) runAll(ctx context.Context, m *Measurement) error {
	for rep := range r.o.Repeats {
		for _, sc := range order(m.Scenarios, rep) {
			if err := r.agent.set(ctx, needsAgent(sc)); err != nil {
				return err
			}
			for _, bm := range r.o.Benchmarks {
				s, err := r.runOne(ctx, sc, bm, rep)
				if err != nil {
					return fmt.Errorf("scenario %s, %s, repeat %d: %w", sc, bm, rep+1, err)
				}
				r.log.Info("sample", "via", pinning.ViaPods, "scenario", sc, "benchmark", bm, "repeat", rep+1, "rate", s.Run.Total.Rate, "unit", s.Run.Unit,
					"ranks", s.Ranks, "neighbour", s.Neighbour)
				m.Samples = append(m.Samples, s)
			}
		}
	}
	return nil
}

// findNode returns the named node, or the cluster's only node when name is empty.
func findNode(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	if name != "" {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		return n, nil
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("the cluster has %d nodes: name the one this program runs on with -node", len(list.Items))
	}
	return &list.Items[0], nil
}

// runnable keeps the scenarios the node can run as asked and says why it drops the others.
func runnable(scenarios []string, policy string, ranks, cpus int) ([]string, []string) {
	var keep, notes []string
	static := policy != kubeletpolicy.PolicyNone
	for _, sc := range scenarios {
		switch {
		case sc == pinning.KubeletStatic && !static:
			notes = append(notes, fmt.Sprintf("pods: %s left out: the kubelet runs CPU manager policy %s; it needs the static policy (KUBELET_CPU_POLICY=static make cluster-up)", sc, policy))
		case needsAgent(sc) && static:
			notes = append(notes, fmt.Sprintf("pods: %s left out: finegrain's agent does not pin beside the kubelet's %s policy; it needs policy none", sc, policy))
		case (sc == pinning.Coarse || sc == pinning.Fine) && ranks < 2:
			notes = append(notes, fmt.Sprintf("pods: %s left out: coarse (one pod of all ranks) and fine (one pod per rank) differ only with 2 or more ranks; "+
				"this node has %d CPUs and keeps at least 1 in the shared pool, so 1 rank runs, and both would be the exclusive scenario", sc, cpus))
		default:
			keep = append(keep, sc)
		}
	}
	return keep, notes
}

// order is the scenarios of one repeat: those without the agent first on even repeats and last
// on odd ones, so that the agent is switched once per repeat and the two groups still take
// turns at running first.
func order(scenarios []string, rep int) []string {
	var without, with []string
	for _, sc := range scenarios {
		if needsAgent(sc) {
			with = append(with, sc)
		} else {
			without = append(without, sc)
		}
	}
	if rep%2 == 1 {
		return append(with, without...)
	}
	return append(without, with...)
}

// runOne runs one benchmark of one scenario: the neighbour first (when the scenario has one),
// then the worker pods, released together; it reads their results from their logs and deletes
// every pod before it returns.
func (r *runner) runOne(ctx context.Context, scenario, benchmark string, rep int) (s pinning.Sample, err error) {
	plan, err := planPods(scenario, r.ranks)
	if err != nil {
		return s, err
	}
	defer func() {
		if derr := r.kube.deletePods(context.WithoutCancel(ctx), r.o.PodTimeout); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	set := podSettings{image: r.o.Image, node: r.node, benchmark: benchmark, n: r.o.N, duration: r.o.Duration,
		arrayLen: r.o.ArrayLen, ntimes: r.o.NTimes, noiseThreads: r.o.NoiseThreads, noiseMiB: r.o.NoiseMiB, noiseCPUs: r.o.NoiseCPUs}
	prefix := fmt.Sprintf("%s-%s-%d", scenario, benchmark, rep+1)
	noiseName := prefix + "-neighbour"
	earliest := time.Now()
	if plan.noise {
		if err := r.kube.create(ctx, noisePod(noiseName, set)); err != nil {
			return s, err
		}
		if _, err := r.kube.wait(ctx, []string{noiseName}, "running", r.o.PodTimeout, running); err != nil {
			return s, err
		}
		earliest = time.Now().Add(r.o.NoiseWarmup)
	}
	set.startAt = time.Now().Add(r.o.StartLead)
	if set.startAt.Before(earliest) {
		set.startAt = earliest
	}
	procs, backend, err := r.runWorkers(ctx, plan, set, prefix)
	if err != nil {
		return s, err
	}
	s = pinning.Sample{Via: pinning.ViaPods, Scenario: scenario, Benchmark: benchmark, Repeat: rep, Neighbour: "none"}
	unit := result.UnitGBs
	if benchmark == result.BenchDGEMM {
		unit = result.UnitGFLOPS
	}
	if s.Run, err = result.Aggregate(benchmark, backend, unit, procs); err != nil {
		return s, err
	}
	if s.Ranks, err = r.ranksPlacement(plan, procs); err != nil {
		return s, err
	}
	if plan.noise {
		log, err := r.kube.logs(ctx, noiseName)
		if err != nil {
			return s, err
		}
		nr, err := parseNoiseLog(log)
		if err != nil {
			return s, fmt.Errorf("neighbour pod %s/%s: %w", r.kube.ns, noiseName, err)
		}
		s.Noise = &nr
		s.Neighbour = r.spell(nr.Affinity)
	}
	return s, nil
}

// runWorkers creates the plan's worker pods, waits for them to finish and reads every rank's
// result from their logs, ranks numbered across the pods; it returns them and the DGEMM backend
// the ranks report.
func (r *runner) runWorkers(ctx context.Context, plan podPlan, set podSettings, prefix string) ([]result.Process, string, error) {
	var names []string
	for i, g := range plan.groups {
		name := fmt.Sprintf("%s-w%d", prefix, i)
		if err := r.kube.create(ctx, workerPod(name, g, set)); err != nil {
			return nil, "", err
		}
		names = append(names, name)
	}
	done, err := r.kube.wait(ctx, names, "finished", time.Until(set.startAt)+r.o.PodTimeout, ended)
	if err != nil {
		return nil, "", err
	}
	var procs []result.Process
	var backend string
	for _, name := range names {
		log, err := r.kube.logs(ctx, name)
		if err != nil {
			return nil, "", err
		}
		if p := done[name]; p.Status.Phase != corev1.PodSucceeded {
			return nil, "", fmt.Errorf("worker pod %s/%s %s; its log ends: %s", r.kube.ns, name, observe.PodSummary(p), tail(log))
		}
		run, err := parseRunLog(log)
		if err != nil {
			return nil, "", fmt.Errorf("worker pod %s/%s: %w", r.kube.ns, name, err)
		}
		for _, p := range run.Processes {
			p.Rank = len(procs)
			procs = append(procs, p)
		}
		backend = run.Backend
	}
	return procs, backend, nil
}

// ranksPlacement spells where the ranks timed: the union of their CPUs at the start when
// someone pinned them, else "floating".
func (r *runner) ranksPlacement(plan podPlan, procs []result.Process) (string, error) {
	if !plan.groups[0].pinned() {
		return "floating", nil
	}
	all := cpuset.New()
	for _, p := range procs {
		set, err := cpulist.Parse(p.AffinityAtStart)
		if err != nil {
			return "", fmt.Errorf("rank %d: affinity at start %q: %w", p.Rank, p.AffinityAtStart, err)
		}
		all = all.Union(set)
	}
	return all.String(), nil
}

// spell names a CPU set for the report: "floating" when it is every online CPU.
func (r *runner) spell(set string) string {
	cpus, err := cpulist.Parse(set)
	if err == nil && cpus.Equals(r.online) {
		return "floating"
	}
	return set
}
