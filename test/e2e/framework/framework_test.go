package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseEnv(t *testing.T) {
	got, err := ParseEnv("# written by up.sh\nKUBECONFIG=/var/lib/x/admin.kubeconfig\n\nNODE_NAME=vm\nKUBELET_RESERVED_CPUS=\nAPI=https://127.0.0.1:6443/a=b\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"KUBECONFIG": "/var/lib/x/admin.kubeconfig", "NODE_NAME": "vm", "KUBELET_RESERVED_CPUS": "", "API": "https://127.0.0.1:6443/a=b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseEnv (-want +got):\n%s", diff)
	}
	for input, wants := range map[string]string{
		"NODE_NAME vm":    "line 1",
		"A=1\nnode=vm":    "line 2",
		"A=1\n1A=2":       "line 2",
		"=x":              "not KEY=VALUE",
		"A=1\nB=2\nA=3\n": "line 3 sets A a second time",
	} {
		if _, err := ParseEnv(input); err == nil || !strings.Contains(err.Error(), wants) {
			t.Errorf("ParseEnv(%q) = %v, want an error containing %q", input, err, wants)
		}
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{"A=1\n# c\nB=\n", "A", "=", "a=b", "A=1\nA=2", "\xff=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		env, err := ParseEnv(data)
		if err != nil {
			return
		}
		for k := range env {
			if !validKey(k) {
				t.Fatalf("ParseEnv(%q) accepted key %q", data, k)
			}
		}
	})
}

func TestDNSPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"TestNodeReady":                      "testnodeready-",
		"TestPins/Guaranteed_pod":            "testpins-guaranteed-pod-",
		"Test" + strings.Repeat("x", 80):     "test" + strings.Repeat("x", 36) + "-",
		"__weird__":                          "weird-",
		"TestA//B":                           "testa-b-",
		strings.Repeat("Ab-", 30) + "/tail!": strings.Repeat("ab-", 13) + "a-",
	} {
		if got := dnsPrefix(name); got != want {
			t.Errorf("dnsPrefix(%q) = %q, want %q", name, got, want)
		}
	}
}

func testPod(qos corev1.PodQOSClass, containerID string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		Status: corev1.PodStatus{
			QOSClass:          qos,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", ContainerID: containerID}},
		},
	}
}

func TestContainerCgroup(t *testing.T) {
	id := strings.Repeat("ab", 32)
	v1 := t.TempDir()
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpuset cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		root string
		qos  corev1.PodQOSClass
		want string
	}{
		{v1, corev1.PodQOSGuaranteed, "cpuset/kubepods/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + id},
		{v1, corev1.PodQOSBurstable, "cpuset/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + id},
		{v1, corev1.PodQOSBestEffort, "cpuset/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + id},
		{v2, corev1.PodQOSBestEffort, "kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + id},
	}
	for _, tc := range cases {
		got, err := ContainerCgroup(tc.root, testPod(tc.qos, "containerd://"+id), "c", "cpuset")
		if err != nil {
			t.Fatalf("ContainerCgroup(%s): %v", tc.qos, err)
		}
		if want := filepath.Join(tc.root, tc.want); got != want {
			t.Errorf("ContainerCgroup(%s) = %s, want %s", tc.qos, got, want)
		}
	}
}

func TestContainerCgroupRejectsUntrustedValues(t *testing.T) {
	id := "containerd://" + strings.Repeat("0", 64)
	badUID := testPod(corev1.PodQOSBestEffort, id)
	badUID.UID = "../../etc"
	for name, tc := range map[string]struct {
		pod       *corev1.Pod
		container string
		wants     string
	}{
		"uid":          {badUID, "c", "not a UUID"},
		"qos":          {testPod("Gold", id), "c", `QoS class "Gold"`},
		"not started":  {testPod(corev1.PodQOSBestEffort, ""), "c", "no runtime ID yet"},
		"id traversal": {testPod(corev1.PodQOSBestEffort, "containerd://../../x"), "c", "no runtime ID yet"},
		"no container": {testPod(corev1.PodQOSBestEffort, id), "other", "no status for container other"},
	} {
		if _, err := ContainerCgroup(t.TempDir(), tc.pod, tc.container, "cpuset"); err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: ContainerCgroup = %v, want an error containing %q", name, err, tc.wants)
		}
	}
}

func TestLocalDefaults(t *testing.T) {
	c := Container("w", WorkerImage)
	c.ImagePullPolicy = ""
	c.Env = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"}}
	pod := Pod("p", c, Container("x", WorkerImage))
	LocalDefaults(pod)
	if !pod.Spec.HostNetwork || *pod.Spec.TerminationGracePeriodSeconds != 1 {
		t.Errorf("pod spec = %+v, want host network and a 1 s grace period", pod.Spec)
	}
	want := []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}}
	if diff := cmp.Diff(want, pod.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env keeps what the test set and adds the rest (-want +got):\n%s", diff)
	}
	for _, c := range pod.Spec.Containers {
		if c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("container %s pull policy %q, want Never", c.Name, c.ImagePullPolicy)
		}
	}
}

func TestPollReturnsLastErrorAtDeadline(t *testing.T) {
	calls := 0
	_, err := Poll(context.Background(), 50*time.Millisecond, func(ctx context.Context) error {
		calls++
		return errors.New("not yet")
	})
	if err == nil || err.Error() != "not yet" || calls < 2 {
		t.Errorf("Poll = %v after %d calls, want the check's error after several calls", err, calls)
	}
	calls = 0
	if _, err := Poll(context.Background(), time.Second, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want success on the third", err, calls)
	}
}

// Every call of a Consistently check, the last included, has time left to make its API calls.
func TestConsistentlyGivesEveryCallTime(t *testing.T) {
	calls := 0
	start := time.Now()
	Consistently(t, "the condition", 60*time.Millisecond, func(ctx context.Context) error {
		calls++
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < time.Second {
			return fmt.Errorf("call %d has %v left", calls, time.Until(dl))
		}
		return nil
	})
	if calls < 2 || time.Since(start) < 60*time.Millisecond {
		t.Errorf("Consistently made %d calls in %v, want several over the whole duration", calls, time.Since(start))
	}
}

func TestTailFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(name, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := tailFile(name, 2); got != "c\nd" {
		t.Errorf("tailFile = %q, want the last two lines", got)
	}
	if got := tailFile(filepath.Join(t.TempDir(), "absent"), 2); !strings.Contains(got, "no such file") {
		t.Errorf("tailFile of a missing file = %q, want the error", got)
	}
}

func TestPollStopsAtAPermanentError(t *testing.T) {
	calls := 0
	took, err := Poll(context.Background(), time.Minute, func(context.Context) error {
		calls++
		return Permanent(fmt.Errorf("the job failed"))
	})
	if calls != 1 || err == nil || err.Error() != "the job failed" || took > 10*time.Second {
		t.Errorf("Poll: %d calls, %v after %v; want one call and the error at once", calls, err, took)
	}
}
