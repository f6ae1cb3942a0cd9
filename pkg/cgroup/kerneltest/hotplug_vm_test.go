package kerneltest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"k8s.io/utils/cpuset"
)

// setOnline takes a CPU offline or brings it back through sysfs.
func setOnline(t *testing.T, cpu int, online bool) {
	t.Helper()
	v := "0"
	if online {
		v = "1"
	}
	path := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", cpu)
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatalf("write %s to %s: %v", v, path, err)
	}
}

// TestGuestCPUHotplug takes one thread of a pinned worker's core offline and brings it back.
// Both cgroup versions narrow the worker at once; when the CPU returns, v2 restores it by itself
// (cpuset.cpus kept the CPU, only the effective set lost it), while v1 dropped it from
// cpuset.cpus for good and the writer's next Apply must put it back — which the agent's reconcile
// loop does.
func TestGuestCPUHotplug(t *testing.T) {
	m, k := guestKernel(t, cgroup.Systemd)
	var core cpuset.CPUSet
	for _, id := range cpuNodes(m) {
		if c := lastCore(m, id); c.Size() >= 2 {
			core = c
		}
	}
	if core.IsEmpty() {
		t.Skip("needs a core with two online threads")
	}
	victim := core.List()[1]
	if _, err := os.Stat(filepath.Join("/sys/devices/system/cpu", fmt.Sprintf("cpu%d", victim), "online")); err != nil {
		t.Skipf("CPU %d cannot be hot-unplugged here: %v", victim, err)
	}
	r := guestRef(t, 300, "Guaranteed")
	k.addContainer(r)
	p := k.start(2, "light", k.dirs(r)...)
	want := cgroup.Resources{CPUs: core, Mems: k.mems}
	k.apply(r, want)
	k.verify(p, core, k.mems)

	setOnline(t, victim, false)
	t.Cleanup(func() {
		if b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", victim)); err == nil && string(b) != "1\n" {
			setOnline(t, victim, true)
		}
	})
	rest := core.Difference(cpuset.New(victim))
	st, err := k.fs.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	if !st.EffectiveCPUs.Equals(rest) {
		t.Errorf("CPU %d offline: effective CPUs %s, want %s", victim, st.EffectiveCPUs, rest)
	}
	k.verify(p, rest, k.mems)

	setOnline(t, victim, true)
	if k.version == cgroup.V1 {
		// v1 removed the CPU from every cpuset, kubepods included, and gives it back to none
		// but the root. The test-owned levels between the root and kubepods stand in for the
		// root here: give it back to them as the kernel gives it back to the root.
		kubepods := k.layout.KubepodsDir(cgroup.CPUSet)
		if got := k.readSet(kubepods, "cpuset.cpus"); got.Contains(victim) {
			t.Errorf("v1 kubepods cpuset.cpus %s still holds CPU %d after it went offline", got, victim)
		}
		var levels []string
		for d := filepath.Dir(kubepods); d != k.layout.Mounts.V1[cgroup.CPUSet]; d = filepath.Dir(d) {
			levels = append([]string{d}, levels...)
		}
		for _, d := range levels {
			k.write(d, "cpuset.cpus", k.online.String())
		}
	}
	st, err = k.fs.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	res := k.apply(r, want)
	if k.version == cgroup.V2 {
		if !st.CPUs.Equals(core) || !st.EffectiveCPUs.Equals(core) || len(res.Changes) != 0 {
			t.Errorf("v2, CPU %d back: cpus %s effective %s, Apply wrote %v; want %s restored by the kernel and nothing to write",
				victim, st.CPUs, st.EffectiveCPUs, changes(res), core)
		}
	} else if !st.CPUs.Equals(rest) || len(res.Changes) == 0 || !res.EffectiveCPUs.Equals(core) {
		t.Errorf("v1, CPU %d back: cpus %s before Apply, Apply wrote %v and left %s; want %s lost, then rewritten to %s",
			victim, st.CPUs, changes(res), res.EffectiveCPUs, rest, core)
	}
	// The threads follow once the CPU is online and the cgroup holds it again.
	deadline := time.Now().Add(5 * time.Second)
	for !threadsOn(p, core) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	k.verify(p, core, k.mems)
}

// threadsOn reports whether every thread of p may run on exactly cpus.
func threadsOn(p *proc, cpus cpuset.CPUSet) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", p.pid, task.Name()))
		if err != nil {
			return false
		}
		if got, ok := statusList(string(b), "Cpus_allowed_list"); !ok || !got.Equals(cpus) {
			return false
		}
	}
	return true
}

// statusList reads a CPU list field of /proc/<pid>/status.
func statusList(status, key string) (cpuset.CPUSet, bool) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			set, err := cpuset.Parse(strings.TrimSpace(v))
			return set, err == nil
		}
	}
	return cpuset.New(), false
}
