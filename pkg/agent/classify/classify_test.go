package classify

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cpulist"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

const (
	podUID = "0b0c7c3e-1f7a-4a43-9c1e-0d1e2f3a4b5c"
	ctrHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var testCfg = Config{PlacerSchedulerName: DefaultPlacerSchedulerName, CPUQuota: Limit, MemoryLimit: Off, CPUPeriodUS: 100000}

func res(req, lim map[corev1.ResourceName]string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range req {
		r.Requests[k] = resource.MustParse(v)
	}
	for k, v := range lim {
		r.Limits[k] = resource.MustParse(v)
	}
	return r
}

func cpu(v string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{corev1.ResourceCPU: v}
}

func pod(labels, annotations map[string]string, sched string, ctrs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "hpc", UID: podUID, Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{SchedulerName: sched, Containers: ctrs},
		Status:     corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed, Phase: corev1.PodPending},
	}
}

var exclusive = map[string]string{LabelPinning: PinningExclusive}

func TestClassifyExclusive(t *testing.T) {
	p := pod(exclusive, nil, "default-scheduler",
		corev1.Container{Name: "rank", Resources: res(cpu("2"), cpu("2"))},
		corev1.Container{Name: "milli", Resources: res(cpu("1000m"), cpu("1000m"))},
	)
	got := Classify(p, testCfg)
	if !got.Exclusive || len(got.Problems) != 0 {
		t.Fatalf("Classify = exclusive %v problems %v, want exclusive without problems", got.Exclusive, got.Problems)
	}
	want := []Container{
		{Name: "rank", CPUs: 2, Shared: cgroup.Resources{CPUQuota: cgroup.Quota{QuotaUS: 200000, PeriodUS: 100000}}},
		{Name: "milli", CPUs: 1, Shared: cgroup.Resources{CPUQuota: cgroup.Quota{QuotaUS: 100000, PeriodUS: 100000}}},
	}
	if diff := cmp.Diff(want, got.Containers, cmp.Comparer(func(a, b cgroup.Resources) bool { return a.CPUQuota == b.CPUQuota && a.MemoryLimit == b.MemoryLimit })); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if got.QOS != cgroup.Guaranteed || got.UID != podUID || got.Namespace != "hpc" || got.Name != "w-0" {
		t.Errorf("identity = %q %s/%s qos %s", got.UID, got.Namespace, got.Name, got.QOS)
	}
	if n := len(got.ExclusiveContainers()); n != 2 {
		t.Errorf("ExclusiveContainers = %d, want 2", n)
	}
}

func TestClassifyProblems(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		sched       string
		ctr         corev1.Container
		wantCPUs    int
		wantNUMA    int // -1: none
		wantReason  string
		wantInMsg   string
	}{
		{name: "no label", ctr: corev1.Container{Name: "c", Resources: res(cpu("2"), nil)}, wantNUMA: -1},
		{name: "label typo", labels: map[string]string{LabelPinning: "Exclusive"}, ctr: corev1.Container{Name: "c", Resources: res(cpu("2"), nil)},
			wantNUMA: -1, wantReason: ReasonInvalidPinningLabel, wantInMsg: `"Exclusive"`},
		{name: "fractional request", labels: exclusive, ctr: corev1.Container{Name: "c", Resources: res(cpu("1500m"), nil)},
			wantNUMA: -1, wantReason: ReasonNotPinned, wantInMsg: "not a whole number"},
		{name: "no request", labels: exclusive, ctr: corev1.Container{Name: "c"},
			wantNUMA: -1, wantReason: ReasonNotPinned, wantInMsg: "no CPU request"},
		{name: "zero request", labels: exclusive, ctr: corev1.Container{Name: "c", Resources: res(cpu("0"), nil)},
			wantNUMA: -1, wantReason: ReasonNotPinned, wantInMsg: "not positive"},
		{name: "hint from placer", labels: exclusive, annotations: map[string]string{AnnotationNUMANode: "1"}, sched: DefaultPlacerSchedulerName,
			ctr: corev1.Container{Name: "c", Resources: res(cpu("1"), nil)}, wantCPUs: 1, wantNUMA: 1},
		{name: "hint from author", labels: exclusive, annotations: map[string]string{AnnotationNUMANode: "1"}, sched: "default-scheduler",
			ctr: corev1.Container{Name: "c", Resources: res(cpu("1"), nil)}, wantCPUs: 1, wantNUMA: -1, wantReason: ReasonNUMAHintIgnored},
		{name: "hint garbage", labels: exclusive, annotations: map[string]string{AnnotationNUMANode: "../../0"}, sched: DefaultPlacerSchedulerName,
			ctr: corev1.Container{Name: "c", Resources: res(cpu("1"), nil)}, wantCPUs: 1, wantNUMA: -1, wantReason: ReasonInvalidNUMAHint},
		{name: "hint too large", labels: exclusive, annotations: map[string]string{AnnotationNUMANode: "99999"}, sched: DefaultPlacerSchedulerName,
			ctr: corev1.Container{Name: "c", Resources: res(cpu("1"), nil)}, wantCPUs: 1, wantNUMA: -1, wantReason: ReasonInvalidNUMAHint, wantInMsg: "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(pod(tc.labels, tc.annotations, tc.sched, tc.ctr), testCfg)
			if c, _ := got.Container("c"); c.CPUs != tc.wantCPUs {
				t.Errorf("CPUs = %d, want %d", c.CPUs, tc.wantCPUs)
			}
			id, required := got.NUMA.Node()
			if (tc.wantNUMA < 0) == required || (required && int(id) != tc.wantNUMA) {
				t.Errorf("NUMA = %d required %v, want %d", id, required, tc.wantNUMA)
			}
			switch {
			case tc.wantReason == "" && len(got.Problems) > 0:
				t.Errorf("problems = %v, want none", got.Problems)
			case tc.wantReason != "" && (len(got.Problems) != 1 || got.Problems[0].Reason != tc.wantReason || !strings.Contains(got.Problems[0].Message, tc.wantInMsg)):
				t.Errorf("problems = %v, want one %s mentioning %q", got.Problems, tc.wantReason, tc.wantInMsg)
			}
		})
	}
}

func TestClassifyInitAndStatus(t *testing.T) {
	p := pod(exclusive, nil, "", corev1.Container{Name: "rank", Resources: res(cpu("1"), cpu("1"))})
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: res(cpu("1"), cpu("1"))}}
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "rank", ContainerID: "containerd://" + ctrHex},
		{Name: "bogus", ContainerID: "containerd://../../etc"},
		{Name: "old", ContainerID: "containerd://" + strings.Repeat("e", 64), State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", ContainerID: "cri-o://" + strings.Repeat("a", 64)}}
	got := Classify(p, testCfg)
	if c, ok := got.Container("setup"); !ok || c.CPUs != 0 {
		t.Errorf("init container = %+v %v, want shared", c, ok)
	}
	if !got.Terminal {
		t.Error("Terminal = false for a succeeded pod")
	}
	want := map[cgroup.ContainerID]string{
		{Runtime: cgroup.RuntimeContainerd, ID: ctrHex}:            "rank",
		{Runtime: cgroup.RuntimeCRIO, ID: strings.Repeat("a", 64)}: "setup",
	}
	if diff := cmp.Diff(want, got.IDs); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestSharedResources(t *testing.T) {
	mem := func(req, lim string) corev1.ResourceRequirements {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
		if req != "" {
			r.Requests[corev1.ResourceMemory] = resource.MustParse(req)
			r.Requests[corev1.ResourceCPU] = resource.MustParse("250m")
		}
		if lim != "" {
			r.Limits[corev1.ResourceMemory] = resource.MustParse(lim)
			r.Limits[corev1.ResourceCPU] = resource.MustParse("2")
		}
		return r
	}
	unlimited := cgroup.Quota{QuotaUS: cgroup.QuotaUnlimited, PeriodUS: 100000}
	for _, tc := range []struct {
		name      string
		cpuP, mem Policy
		r         corev1.ResourceRequirements
		wantQuota cgroup.Quota
		wantMem   int64
	}{
		{"off", Off, Off, mem("64Mi", "128Mi"), cgroup.Quota{}, 0},
		{"limit", Limit, Limit, mem("64Mi", "128Mi"), cgroup.Quota{QuotaUS: 200000, PeriodUS: 100000}, 128 << 20},
		{"limit without limits", Limit, Limit, mem("64Mi", ""), unlimited, cgroup.MemoryUnlimited},
		{"request", Request, Request, mem("64Mi", "128Mi"), cgroup.Quota{QuotaUS: 25000, PeriodUS: 100000}, 64 << 20},
		{"request falls back to limit", Request, Request, mem("", "128Mi"), cgroup.Quota{QuotaUS: 200000, PeriodUS: 100000}, 128 << 20},
		{"best effort", Request, Request, corev1.ResourceRequirements{}, unlimited, cgroup.MemoryUnlimited},
		{"tiny request", Request, Off, res(cpu("1m"), nil), cgroup.Quota{QuotaUS: minQuotaUS, PeriodUS: 100000}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg
			cfg.CPUQuota, cfg.MemoryLimit = tc.cpuP, tc.mem
			got := sharedResources(tc.r, cfg)
			if got.CPUQuota != tc.wantQuota || got.MemoryLimit != tc.wantMem {
				t.Errorf("sharedResources = quota %+v memory %d, want %+v %d", got.CPUQuota, got.MemoryLimit, tc.wantQuota, tc.wantMem)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the cgroup writer would refuse it: %v", err)
			}
		})
	}
}

func TestQOSFallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    corev1.ResourceRequirements
		want cgroup.QOSClass
	}{
		{"none", corev1.ResourceRequirements{}, cgroup.BestEffort},
		{"requests only", res(cpu("1"), nil), cgroup.Burstable},
		{"equal limits", res(map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}, map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}), cgroup.Guaranteed},
		{"limits only", res(nil, map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}), cgroup.Guaranteed},
		{"cpu limit only", res(nil, cpu("1")), cgroup.Burstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(nil, nil, "", corev1.Container{Name: "c", Resources: tc.r})
			p.Status.QOSClass = ""
			if got := Classify(p, testCfg).QOS; got != tc.want {
				t.Errorf("QOS = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := testCfg.Validate(); err != nil {
		t.Fatalf("Validate(default) = %v", err)
	}
	for _, cfg := range []Config{
		{CPUQuota: Limit, MemoryLimit: Off, CPUPeriodUS: 100000},
		{PlacerSchedulerName: "p", CPUQuota: "always", MemoryLimit: Off, CPUPeriodUS: 100000},
		{PlacerSchedulerName: "p", CPUQuota: Off, MemoryLimit: "", CPUPeriodUS: 100000},
		{PlacerSchedulerName: "p", CPUQuota: Limit, MemoryLimit: Off, CPUPeriodUS: 10},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
}

func TestParseNUMANode(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "7": 7, "16383": cpulist.MaxID} {
		if got, err := ParseNUMANode(in); err != nil || got != want {
			t.Errorf("ParseNUMANode(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "+1", "01", " 1", "1 ", "0x1", "16384", "1e3", "１"} {
		if _, err := ParseNUMANode(in); err == nil {
			t.Errorf("ParseNUMANode(%q) = nil error", in)
		}
	}
}

func FuzzParseNUMANode(f *testing.F) {
	for _, s := range []string{"0", "1", "16383", "16384", "-0", "007", "\x00", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseNUMANode(s)
		if err != nil {
			return
		}
		if id < 0 || id > cpulist.MaxID {
			t.Fatalf("ParseNUMANode(%q) = %d, outside 0-%d", s, id, cpulist.MaxID)
		}
	})
}

// FuzzClassify feeds arbitrary label, annotation, scheduler and request values: classification
// never panics, never pins a container without an integer request, and only honours a hint on
// placer pods.
func FuzzClassify(f *testing.F) {
	f.Add("exclusive", "0", DefaultPlacerSchedulerName, "2")
	f.Add("exclusive", "1", "default-scheduler", "1500m")
	f.Add("EXCLUSIVE", "x", "", "0")
	f.Add("exclusive", "", DefaultPlacerSchedulerName, "1e3")
	f.Fuzz(func(t *testing.T, label, hint, sched, request string) {
		q, err := resource.ParseQuantity(request)
		r := corev1.ResourceRequirements{}
		if err == nil {
			r.Requests = corev1.ResourceList{corev1.ResourceCPU: q}
		}
		got := Classify(pod(map[string]string{LabelPinning: label}, map[string]string{AnnotationNUMANode: hint}, sched,
			corev1.Container{Name: "c", Resources: r}), testCfg)
		c, _ := got.Container("c")
		if c.CPUs > 0 {
			if n, err := policy.CPUCount(q); err != nil || n != c.CPUs || label != PinningExclusive {
				t.Fatalf("pinned %d CPUs for label %q request %q", c.CPUs, label, request)
			}
		}
		if _, required := got.NUMA.Node(); required && sched != DefaultPlacerSchedulerName {
			t.Fatalf("NUMA hint honoured for scheduler %q", sched)
		}
	})
}
