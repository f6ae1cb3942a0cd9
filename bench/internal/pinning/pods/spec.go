// Package pods runs the pinning scenarios of package pinning as pods on a real Kubernetes node:
// fgworker ranks in worker pods (one pod per rank, or one pod for all ranks in the coarse
// scenario), the noisy neighbour in a Burstable pod, pinned by finegrain's node agent (pods
// labelled finegrain.dev/pinning: exclusive) or by the kubelet's static CPU manager policy, and
// collects each worker pod's result from its log. It creates and deletes only its own namespace
// and the pods in it; the node agent's DaemonSet it pauses (or deploys) for the scenarios that
// need it absent (or present) and always puts back as it found it. Summaries and reports are
// package pinning's.
package pods

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
	"github.com/finegrain-dev/finegrain/bench/internal/worker"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
)

// Labels of the bench's pods.
const (
	labelApp  = "app.kubernetes.io/name"
	appName   = "finegrain-pinning-bench"
	labelRole = "finegrain.dev/bench-role"
	roleRank  = "worker"
	roleNoise = "neighbour"
	container = "fgworker"
)

// workerGroup is one worker pod of a scenario: how many ranks it runs and how it asks for CPUs.
type workerGroup struct {
	ranks int
	// exclusive labels the pod for finegrain's agent; guaranteed makes its requests equal its
	// limits (integer CPUs: the kubelet's static policy pins it); neither: it floats (Burstable).
	exclusive, guaranteed bool
}

// pinned reports whether someone pins the pod: then its ranks wait for their CPUs.
func (g workerGroup) pinned() bool { return g.exclusive || g.guaranteed }

// podPlan is what one scenario runs on the node.
type podPlan struct {
	groups []workerGroup
	noise  bool
}

// planPods lays out a scenario with ranks ranks as pods: alone and unmanaged are Burstable pods
// of one rank each, floating; exclusive and fine are Guaranteed pods of one rank and one CPU
// each, labelled for finegrain's agent; coarse is one such pod holding every rank with as many
// CPUs; kubelet-static is exclusive's pods without the label, pinned by the kubelet.
func planPods(scenario string, ranks int) (podPlan, error) {
	if ranks < 1 {
		return podPlan{}, fmt.Errorf("scenario %s: %d ranks, want at least 1", scenario, ranks)
	}
	each := func(g workerGroup) []workerGroup {
		out := make([]workerGroup, ranks)
		for i := range out {
			out[i] = g
		}
		return out
	}
	switch scenario {
	case pinning.Alone:
		return podPlan{groups: each(workerGroup{ranks: 1})}, nil
	case pinning.Unmanaged:
		return podPlan{groups: each(workerGroup{ranks: 1}), noise: true}, nil
	case pinning.Exclusive, pinning.Fine:
		return podPlan{groups: each(workerGroup{ranks: 1, exclusive: true, guaranteed: true}), noise: true}, nil
	case pinning.Coarse:
		return podPlan{groups: []workerGroup{{ranks: ranks, exclusive: true, guaranteed: true}}, noise: true}, nil
	case pinning.KubeletStatic:
		return podPlan{groups: each(workerGroup{ranks: 1, guaranteed: true}), noise: true}, nil
	}
	return podPlan{}, fmt.Errorf("unknown scenario %q: use one of %v", scenario, pinning.AllScenarios)
}

// needsAgent reports whether finegrain's node agent must run for a scenario; the others run
// without it, as on a node finegrain was never deployed to.
func needsAgent(scenario string) bool {
	return scenario == pinning.Exclusive || scenario == pinning.Coarse || scenario == pinning.Fine
}

// podSettings are the values every pod of a run shares.
type podSettings struct {
	image     string
	node      string
	benchmark string
	// N, Duration, ArrayLen (never 0: sized on the node beforehand, so that the memory request
	// can be computed) and NTimes go to the ranks.
	n        int
	duration time.Duration
	arrayLen int
	ntimes   int
	// startAt releases every rank; the neighbour's threads, MiB and CPU limit (0: none).
	startAt      time.Time
	noiseThreads int
	noiseMiB     int
	noiseCPUs    float64
}

// rankMiB is the memory one rank needs: its matrices or arrays and the Go runtime's share.
func (s podSettings) rankMiB() int64 {
	const overhead = 64
	var bytes int64
	if s.benchmark == worker.ModeDGEMM {
		bytes = 3 * 8 * int64(s.n) * int64(s.n)
	} else {
		bytes = 3 * 8 * int64(s.arrayLen)
	}
	return (bytes+1<<20-1)>>20 + overhead
}

// workerPod is the pod of group g; name is its name.
func workerPod(name string, g workerGroup, s podSettings) *corev1.Pod {
	args := []string{s.benchmark, "-np", strconv.Itoa(g.ranks), "-o", worker.OutputLog,
		"-n", strconv.Itoa(s.n), "-duration", s.duration.String(),
		"-array", strconv.Itoa(s.arrayLen), "-ntimes", strconv.Itoa(s.ntimes),
		"-start-at", s.startAt.UTC().Format(time.RFC3339Nano)}
	if g.pinned() {
		args = append(args, "-await-cpus", strconv.Itoa(g.ranks))
	}
	// The parent process waits while the ranks compute: 64 MiB covers it.
	mem := resource.NewQuantity((int64(g.ranks)*s.rankMiB()+64)<<20, resource.BinarySI)
	cpus := resource.NewQuantity(int64(g.ranks), resource.DecimalSI)
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *cpus, corev1.ResourceMemory: *mem}}
	if g.guaranteed {
		res.Limits = res.Requests.DeepCopy()
	}
	p := pod(name, roleRank, s, corev1.Container{Args: args, Resources: res})
	if g.exclusive {
		p.Labels[classify.LabelPinning] = classify.PinningExclusive
	}
	return p
}

// noisePod is the neighbour: Burstable, requesting no CPU (so that it fits beside Guaranteed
// workers that take a static kubelet's whole allocatable CPU) and limited to s.noiseCPUs, which
// the kubelet enforces as a CFS quota. It reports its running totals every second.
func noisePod(name string, s podSettings) *corev1.Pod {
	args := []string{worker.ModeNoise, "-threads", strconv.Itoa(s.noiseThreads), "-mem-mib", strconv.Itoa(s.noiseMiB),
		"-duration", "0", "-o", worker.OutputLog, "-report", "1s"}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("0"),
		corev1.ResourceMemory: *resource.NewQuantity(int64(s.noiseMiB+64)<<20, resource.BinarySI),
	}}
	if s.noiseCPUs > 0 {
		res.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(s.noiseCPUs*1000), resource.DecimalSI)}
	}
	return pod(name, roleNoise, s, corev1.Container{Args: args, Resources: res})
}

// pod wraps c as the only container of a pod the local cluster can run: host network (there is
// no pod network), the local image never pulled, bound to the node by its host name label, never
// restarted, and allowed to open perf counters (CAP_PERFMON: the software counters of context
// switches and migrations count kernel events, which perf_event_paranoid 2 denies otherwise).
func pod(name, role string, s podSettings, c corev1.Container) *corev1.Pod {
	c.Name, c.Image, c.ImagePullPolicy = container, s.image, corev1.PullNever
	c.Command = []string{"fgworker"}
	c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"PERFMON"}}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelApp: appName, labelRole: role}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostNetwork:                   true,
			NodeSelector:                  map[string]string{corev1.LabelHostname: s.node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
}
