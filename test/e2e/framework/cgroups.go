package framework

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CgroupRoot is where the machine mounts its cgroup hierarchies.
const CgroupRoot = "/sys/fs/cgroup"

var (
	podUIDPattern      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ContainerID returns the runtime's ID of a started container of pod, from its status
// ("containerd://<64 hex digits>").
func ContainerID(pod *corev1.Pod, container string) (string, error) {
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if s.Name != container {
			continue
		}
		_, id, ok := strings.Cut(s.ContainerID, "://")
		if !ok || !containerIDPattern.MatchString(id) {
			return "", fmt.Errorf("container %s of pod %s/%s has no runtime ID yet (status says %q)", container, pod.Namespace, pod.Name, s.ContainerID)
		}
		return id, nil
	}
	return "", fmt.Errorf("pod %s/%s has no status for container %s", pod.Namespace, pod.Name, container)
}

// PodCgroup returns the pod's cgroup relative to a hierarchy's root, as the kubelet's cgroupfs
// driver lays it out: kubepods/pod<uid> for Guaranteed pods, kubepods/burstable/pod<uid> and
// kubepods/besteffort/pod<uid> for the others.
func PodCgroup(pod *corev1.Pod) (string, error) {
	uid := string(pod.UID)
	if !podUIDPattern.MatchString(uid) {
		return "", fmt.Errorf("pod %s/%s has UID %q, not a UUID", pod.Namespace, pod.Name, uid)
	}
	switch pod.Status.QOSClass {
	case corev1.PodQOSGuaranteed:
		return path.Join("kubepods", "pod"+uid), nil
	case corev1.PodQOSBurstable:
		return path.Join("kubepods", "burstable", "pod"+uid), nil
	case corev1.PodQOSBestEffort:
		return path.Join("kubepods", "besteffort", "pod"+uid), nil
	}
	return "", fmt.Errorf("pod %s/%s has QoS class %q; the API server sets one of Guaranteed, Burstable, BestEffort", pod.Namespace, pod.Name, pod.Status.QOSClass)
}

// ContainerCgroup returns the directory of a container's cgroup for one controller (cpuset, cpu,
// memory, ...) under root (CgroupRoot on a real node), for a kubelet with the default cgroupRoot.
// On a unified (v2) hierarchy the controller does not change the directory.
func ContainerCgroup(root string, pod *corev1.Pod, container, controller string) (string, error) {
	return ContainerCgroupUnder(root, "", pod, container, controller)
}

// ContainerCgroupUnder is ContainerCgroup for a kubelet whose cgroupRoot is base (a relative
// path, Node.CgroupRoot): the kubepods tree hangs below base in each hierarchy.
func ContainerCgroupUnder(root, base string, pod *corev1.Pod, container, controller string) (string, error) {
	podDir, err := PodCgroup(pod)
	if err != nil {
		return "", err
	}
	id, err := ContainerID(pod, container)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return filepath.Join(root, base, podDir, id), nil
	}
	return filepath.Join(root, controller, base, podDir, id), nil
}

// ReadCgroupFile reads one file of a cgroup directory, without the trailing newline.
func ReadCgroupFile(dir, name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("read cgroup file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// cgroupFiles are the files of a container's cgroup the failure dump shows, by controller; a
// missing file (another cgroup version) is skipped.
var cgroupFiles = []struct{ controller, file string }{
	{"cpuset", "cpuset.cpus"},
	{"cpuset", "cpuset.effective_cpus"},
	{"cpuset", "cpuset.mems"},
	{"cpuset", "cpuset.cpus.effective"},
	{"cpuset", "cpuset.mems.effective"},
	{"cpu", "cpu.cfs_quota_us"},
	{"cpu", "cpu.cfs_period_us"},
	{"cpu", "cpu.shares"},
	{"cpu", "cpu.max"},
	{"cpu", "cpu.weight"},
	{"memory", "memory.limit_in_bytes"},
	{"memory", "memory.max"},
}
