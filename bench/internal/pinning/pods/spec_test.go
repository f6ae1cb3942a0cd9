package pods

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/bench/internal/pinning"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// agentView is how finegrain's node agent reads a pod.
func agentView(p *corev1.Pod) classify.Pod {
	return classify.Classify(p, classify.Config{PlacerSchedulerName: classify.DefaultPlacerSchedulerName, CPUQuota: classify.Limit, MemoryLimit: classify.Limit, CPUPeriodUS: 100000})
}

var settings = podSettings{image: "localhost/finegrain-worker:dev", node: "vm", benchmark: "dgemm", n: 1024, duration: 5 * time.Second,
	arrayLen: 4 << 20, ntimes: 20, startAt: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC), noiseThreads: 2, noiseMiB: 512, noiseCPUs: 1}

func TestPlanPods(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		ranks    int
		want     []workerGroup
		noise    bool
	}{
		{pinning.Alone, 2, []workerGroup{{ranks: 1}, {ranks: 1}}, false},
		{pinning.Unmanaged, 1, []workerGroup{{ranks: 1}}, true},
		{pinning.Exclusive, 2, []workerGroup{{ranks: 1, exclusive: true, guaranteed: true}, {ranks: 1, exclusive: true, guaranteed: true}}, true},
		{pinning.Fine, 1, []workerGroup{{ranks: 1, exclusive: true, guaranteed: true}}, true},
		{pinning.Coarse, 3, []workerGroup{{ranks: 3, exclusive: true, guaranteed: true}}, true},
		{pinning.KubeletStatic, 2, []workerGroup{{ranks: 1, guaranteed: true}, {ranks: 1, guaranteed: true}}, true},
	} {
		p, err := planPods(tc.scenario, tc.ranks)
		if err != nil {
			t.Fatalf("%s: %v", tc.scenario, err)
		}
		if !slices.Equal(p.groups, tc.want) || p.noise != tc.noise {
			t.Errorf("%s with %d ranks: %+v, want groups %+v, noise %v", tc.scenario, tc.ranks, p, tc.want, tc.noise)
		}
	}
	if _, err := planPods("gang", 1); err == nil || !strings.Contains(err.Error(), `unknown scenario "gang"`) {
		t.Errorf("unknown scenario: %v", err)
	}
	if _, err := planPods(pinning.Alone, 0); err == nil {
		t.Error("0 ranks planned")
	}
}

// TestWorkerPod checks what the kubelet and the agent read from a worker pod: its QoS class,
// the opt-in label, integer CPUs, enough memory, the local cluster's settings, and the ranks'
// arguments.
func TestWorkerPod(t *testing.T) {
	for _, tc := range []struct {
		g         workerGroup
		qos       cgroup.QOSClass
		exclusive int
		awaitCPUs string
	}{
		{workerGroup{ranks: 1}, cgroup.Burstable, 0, ""},
		{workerGroup{ranks: 1, exclusive: true, guaranteed: true}, cgroup.Guaranteed, 1, "1"},
		{workerGroup{ranks: 3, exclusive: true, guaranteed: true}, cgroup.Guaranteed, 3, "3"},
		{workerGroup{ranks: 1, guaranteed: true}, cgroup.Guaranteed, 0, "1"},
	} {
		p := workerPod("w", tc.g, settings)
		view := agentView(p)
		if view.QOS != tc.qos || len(view.Problems) > 0 {
			t.Errorf("%+v: QoS %s, problems %+v; want %s and none", tc.g, view.QOS, view.Problems, tc.qos)
		}
		if got := view.Containers[0].CPUs; got != tc.exclusive {
			t.Errorf("%+v: the agent gives it %d exclusive CPUs, want %d", tc.g, got, tc.exclusive)
		}
		c := p.Spec.Containers[0]
		if cpu := c.Resources.Requests.Cpu(); cpu.Value() != int64(tc.g.ranks) || cpu.MilliValue() != int64(1000*tc.g.ranks) {
			t.Errorf("%+v: CPU request %s, want %d whole CPUs", tc.g, cpu, tc.g.ranks)
		}
		// Three 1024² matrices of float64 are 24 MiB per rank; 64 MiB runtime each, 64 MiB parent.
		if mem := c.Resources.Requests.Memory().Value() >> 20; mem != int64(tc.g.ranks*(24+64)+64) {
			t.Errorf("%+v: memory request %d MiB", tc.g, mem)
		}
		if !p.Spec.HostNetwork || c.ImagePullPolicy != corev1.PullNever || p.Spec.RestartPolicy != corev1.RestartPolicyNever ||
			p.Spec.NodeSelector[corev1.LabelHostname] != "vm" || c.Image != settings.image {
			t.Errorf("%+v: pod does not fit the local cluster: %+v", tc.g, p.Spec)
		}
		if caps := c.SecurityContext.Capabilities.Add; !slices.Equal(caps, []corev1.Capability{"PERFMON"}) {
			t.Errorf("%+v: capabilities %v, want PERFMON for the perf counters", tc.g, caps)
		}
		args := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
		want := "fgworker dgemm -np " + string(rune('0'+tc.g.ranks)) + " -o log -n 1024 -duration 5s -array 4194304 -ntimes 20 -start-at 2026-01-02T03:04:05.6Z"
		if tc.awaitCPUs != "" {
			want += " -await-cpus " + tc.awaitCPUs
		}
		if args != want {
			t.Errorf("%+v: command\n %s\nwant\n %s", tc.g, args, want)
		}
	}
	stream := settings
	stream.benchmark = "stream"
	// Three arrays of 4 Mi float64 are 96 MiB.
	if mem := workerPod("w", workerGroup{ranks: 1}, stream).Spec.Containers[0].Resources.Requests.Memory().Value() >> 20; mem != 96+64+64 {
		t.Errorf("stream memory request %d MiB", mem)
	}
}

// TestNoisePod: the neighbour is Burstable, requests no CPU (it must fit beside Guaranteed
// workers on a static kubelet's one allocatable CPU), and its limit becomes its quota.
func TestNoisePod(t *testing.T) {
	p := noisePod("n", settings)
	c := p.Spec.Containers[0]
	view := agentView(p)
	if view.QOS != cgroup.Burstable || view.Exclusive {
		t.Errorf("QoS %s, exclusive %v; want Burstable in the shared pool", view.QOS, view.Exclusive)
	}
	if q := view.Containers[0].Shared.CPUQuota; q.QuotaUS != 100000 || q.PeriodUS != 100000 {
		t.Errorf("the agent gives the neighbour quota %+v, want 1 CPU", q)
	}
	if !c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Cpu().MilliValue() != 1000 {
		t.Errorf("CPU request %s, limit %s; want 0 and 1", c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu())
	}
	if args := strings.Join(c.Args, " "); args != "noise -threads 2 -mem-mib 512 -duration 0 -o log -report 1s" {
		t.Errorf("noise arguments %q", args)
	}
	none := settings
	none.noiseCPUs = 0
	if lim := noisePod("n", none).Spec.Containers[0].Resources.Limits; lim != nil {
		t.Errorf("-noise-cpus 0 still sets limits %v", lim)
	}
}

func TestRunnableAndOrder(t *testing.T) {
	keep, notes := runnable(pinning.AllScenarios, "none", 1, 2)
	if !slices.Equal(keep, []string{"alone", "unmanaged", "exclusive"}) || len(notes) != 3 {
		t.Errorf("policy none, 1 rank: kept %v, notes %q", keep, notes)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "this node has 2 CPUs and keeps at least 1 in the shared pool") {
		t.Errorf("notes do not say why coarse and fine are left out: %q", notes)
	}
	keep, _ = runnable(pinning.AllScenarios, "static", 2, 4)
	if !slices.Equal(keep, []string{"alone", "unmanaged", "kubelet-static"}) {
		t.Errorf("policy static: kept %v", keep)
	}
	keep, _ = runnable(pinning.AllScenarios, "none", 2, 4)
	if !slices.Equal(keep, []string{"alone", "unmanaged", "exclusive", "coarse", "fine"}) {
		t.Errorf("policy none, 2 ranks: kept %v", keep)
	}
	all := []string{"alone", "unmanaged", "exclusive", "coarse"}
	if got := order(all, 0); !slices.Equal(got, []string{"alone", "unmanaged", "exclusive", "coarse"}) {
		t.Errorf("even repeat: %v", got)
	}
	if got := order(all, 1); !slices.Equal(got, []string{"exclusive", "coarse", "alone", "unmanaged"}) {
		t.Errorf("odd repeat: %v", got)
	}
}
