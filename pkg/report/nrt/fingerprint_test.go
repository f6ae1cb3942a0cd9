package nrt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/k8stopologyawareschedwg/podfingerprint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The expected values were derived outside Go, with Debian's python3-xxhash (the C xxHash
// library), following the podfingerprint algorithm (version v001):
//
//	h(ns, name) = xxh64(name, seed=xxh64(ns).intdigest()).intdigest()
//	"pfp0v001" + xxh64(b"".join(struct.pack("<Q", h) for h in sorted(hashes))).hexdigest()
//
// e.g. xxh64("default") = 0xcb14bd8a5c561c96 and xxh64("mpi-worker-0", seed=that) =
// 0xd6274411bb16e8ff. The three "production" pods are the podfingerprint project's published
// compatibility vector (compat-tiny-3pods-1ns), which the same steps reproduce.
func TestPodsFingerprintKnownVectors(t *testing.T) {
	tests := []struct {
		name string
		pods []PodName
		want string
	}{
		{"no pods: xxh64 of nothing", nil, "pfp0v001ef46db3751d8e999"},
		{"one pod", []PodName{{"default", "mpi-worker-0"}}, "pfp0v001af5c8f183c85ac0e"},
		{"two namespaces", []PodName{{"default", "mpi-worker-0"}, {"hpc", "lammps-1"}}, "pfp0v001e356249eb9bd33bd"},
		{"upstream compatibility vector", []PodName{
			{"production", "jaeger-dpgjk"}, {"production", "nginx-rt684"}, {"production", "envoy-g9m22"},
		}, "pfp0v001607b76a0e9d3aeb4"},
		{"namespace/name boundary a/bc", []PodName{{"a", "bc"}}, "pfp0v001226f74aca223c6a2"},
		{"namespace/name boundary ab/c", []PodName{{"ab", "c"}}, "pfp0v001f981c6658579a9de"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodsFingerprint(tt.pods); got != tt.want {
				t.Errorf("PodsFingerprint(%v) = %s, want %s", tt.pods, got, tt.want)
			}
		})
	}
}

func TestPodsFingerprintIgnoresOrderAndDuplicates(t *testing.T) {
	a := []PodName{{"hpc", "lammps-1"}, {"default", "mpi-worker-0"}}
	b := []PodName{{"default", "mpi-worker-0"}, {"hpc", "lammps-1"}, {"hpc", "lammps-1"}}
	if PodsFingerprint(a) != PodsFingerprint(b) || PodsFingerprint(a) != "pfp0v001e356249eb9bd33bd" {
		t.Errorf("fingerprints differ: %s (reordered) vs %s (with a duplicate)", PodsFingerprint(a), PodsFingerprint(b))
	}
	if got := PodsFingerprint(a[:1]); got == PodsFingerprint(a) {
		t.Errorf("removing a pod kept fingerprint %s", got)
	}
	if got := PodsFingerprint(a); len(got) != len(FingerprintPrefix)+16 || !strings.HasPrefix(got, FingerprintPrefix) {
		t.Errorf("fingerprint %q is not %s followed by 16 hex digits", got, FingerprintPrefix)
	}
}

func BenchmarkPodsFingerprint(b *testing.B) {
	pods := make([]PodName, 256)
	for i := range pods {
		pods[i] = PodName{Namespace: "ns-" + string(rune('a'+i%16)), Name: "pod-" + strings.Repeat("x", i%32)}
	}
	b.ReportAllocs()
	for b.Loop() {
		PodsFingerprint(pods)
	}
}

// pod returns a pod bound to node-a in phase, with one container per requests list, each
// request also its limit unless burstable.
func pod(name string, phase corev1.PodPhase, qos corev1.PodQOSClass, requests ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: name},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     corev1.PodStatus{Phase: phase, QOSClass: qos},
	}
	for i, r := range requests {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Resources: corev1.ResourceRequirements{Requests: r, Limits: r}})
	}
	return p
}

func res(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// The pods scheduler-plugins' cache counts under with-exclusive-resources (its
// resourcerequests.AreExclusiveForPod over pods its dedicated informer keeps: bound, not Pending).
func TestCountsInFingerprint(t *testing.T) {
	G, B, BE := corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort
	running := corev1.PodRunning
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("guaranteed-whole-cpus", running, G, res("cpu", "2", "memory", "1Gi")), true},
		{pod("guaranteed-fractional-cpu", running, G, res("cpu", "500m", "memory", "1Gi")), true},
		{pod("guaranteed-hugepages-only-cpu-fraction", running, G, res("cpu", "100m", "hugepages-2Mi", "4Mi")), true},
		{pod("burstable-whole-cpus", running, B, res("cpu", "2")), false},
		{pod("best-effort", running, BE, res()), false},
		{pod("burstable-with-a-device", running, B, res("cpu", "1", "example.com/gpu", "1")), true},
		{pod("device-in-second-container", running, B, res("cpu", "1"), res("vendor.io/nic", "1")), true},
		{pod("kubernetes-io-domain-is-native", running, B, res("cpu", "1", "kubernetes.io/batch-cpu", "1")), false},
		{pod("guaranteed-pending", corev1.PodPending, G, res("cpu", "2", "memory", "1Gi")), false},
		{pod("guaranteed-succeeded", corev1.PodSucceeded, G, res("cpu", "2", "memory", "1Gi")), true},
		{pod("guaranteed-failed", corev1.PodFailed, G, res("cpu", "2", "memory", "1Gi")), true},
		{pod("no-qos-in-status-but-guaranteed", running, "", res("cpu", "2", "memory", "1Gi")), true},
	} {
		if got := CountsInFingerprint(tt.pod); got != tt.want {
			t.Errorf("CountsInFingerprint(%s) = %v, want %v", tt.pod.Name, got, tt.want)
		}
	}
	unbound := pod("unbound", running, G, res("cpu", "2", "memory", "1Gi"))
	unbound.Spec.NodeName = ""
	if CountsInFingerprint(unbound) {
		t.Error("an unbound pod counts")
	}
	initOnly := pod("burstable-init-device", running, B, res("cpu", "1"))
	initOnly.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: res("example.com/fpga", "1")}}}
	if !CountsInFingerprint(initOnly) {
		t.Error("a pod whose init container requests a device does not count")
	}
}

// The fingerprint is the podfingerprint library's: its own verification accepts it for the same
// set, in any order, and refuses it for another.
func TestPodsFingerprintPassesTheLibrarysCheck(t *testing.T) {
	pods := []PodName{{"hpc", "lammps-1"}, {"default", "mpi-worker-0"}, {"hpc", "db-0"}}
	sign := PodsFingerprint(pods)
	fp := podfingerprint.NewFingerprint(0)
	for _, p := range slices.Backward(pods) {
		_ = fp.Add(p.Namespace, p.Name)
	}
	if err := fp.Check(sign); err != nil {
		t.Errorf("podfingerprint refuses %s for %v: %v", sign, pods, err)
	}
	_ = fp.Add("hpc", "late-arrival")
	if err := fp.Check(sign); !errors.Is(err, podfingerprint.ErrSignatureMismatch) {
		t.Errorf("podfingerprint's check of a different set: %v, want a mismatch", err)
	}
}
