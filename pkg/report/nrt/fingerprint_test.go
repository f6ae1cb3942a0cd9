package nrt

import (
	"strings"
	"testing"
)

// The expected values were derived outside Go, with Debian's python3-xxhash (the C xxHash
// library), following the steps in PodsFingerprint's comment:
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
