package kerneltest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/test/vm"
	"k8s.io/utils/cpuset"
)

// The tests in the *_vm_test.go files run inside the qemu guests of `make test-vm` (they skip
// elsewhere): they know the machine qemu built (vm.Guest) and check pins against it on every
// NUMA node, with both kubelet cgroup drivers, on the guest's cgroup version.
//
// Pinned workers' threads mostly sleep: on cgroup v2 a cpuset.mems write migrates the cgroup's
// pages before write() returns, and under TCG every page of a process whose threads run costs
// TLB-shootdown IPIs to vCPUs that get little host time, so one write can take minutes (seen:
// ~10 pages/s for a 2-thread spinning Go process on a loaded host). The shared pool's threads
// spin ("busy"); its mems never change, so nothing of theirs migrates.

// guestKernel returns the guest's machine and a test-owned cgroup tree on its cgroup version.
func guestKernel(t *testing.T, d cgroup.Driver) (vm.Machine, *kernel) {
	t.Helper()
	cfg := vm.Guest(t)
	v := cgroup.V2
	if cfg.Cgroup == vm.CgroupV1 {
		v = cgroup.V1
	}
	return cfg.Machine, newKernel(t, v, d)
}

// cpuNodes returns the IDs of the guest's NUMA nodes that have online CPUs.
func cpuNodes(m vm.Machine) []int {
	var ids []int
	for id := range m.Nodes {
		if !m.NodeCPUs(id).IsEmpty() {
			ids = append(ids, id)
		}
	}
	return ids
}

// lastCore returns the online threads of the highest-numbered core of NUMA node id: away from
// CPU 0, which the kernel and /init favour.
func lastCore(m vm.Machine, id int) cpuset.CPUSet {
	var last cpuset.CPUSet
	for _, core := range m.Cores() {
		if core.IsSubsetOf(m.NodeCPUs(id)) {
			last = core
		}
	}
	return last
}

// guestRef is a valid container reference unique to n.
func guestRef(t *testing.T, n int, qos string) cgroup.ContainerRef {
	return ref(t, fmt.Sprintf("6a1e0000-0000-4000-8000-%012d", n), qos, fmt.Sprintf("containerd://%064x", n+1))
}

// startInCgroup starts a helper of n threads inside the container's cgroup from its first
// instruction (clone3 with CLONE_INTO_CGROUP on v2), as runc starts a container: nothing of it
// runs or is allocated outside the cgroup, so no cpuset.mems change has pages to migrate. On v1
// the kernel leaves pages where they are anyway, and the harness's start-then-move does the same.
func (k *kernel) startInCgroup(n int, mode string, r cgroup.ContainerRef) *proc {
	k.t.Helper()
	if k.version == cgroup.V1 {
		return k.start(n, mode, k.dirs(r)...)
	}
	dir := k.dirs(r)[0]
	fd, err := os.Open(dir)
	if err != nil {
		k.t.Fatal(err)
	}
	defer fd.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%s", helperEnv, n, mode))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		k.t.Fatalf("start helper in %s: %v", dir, err)
	}
	p := &proc{cmd: cmd, stdin: stdin, threads: n, pid: cmd.Process.Pid}
	k.mu.Lock()
	k.procs = append(k.procs, p)
	k.mu.Unlock()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			k.t.Fatalf("helper %d in %s said %q, want ready", p.pid, dir, line)
		}
	case <-time.After(20 * time.Second):
		k.t.Fatalf("helper %d in %s not ready after 20 s", p.pid, dir)
	}
	return p
}

// TestGuestV2NoInternalProcesses shows the v2 rule the kubelet's tree lives by: a pod cgroup
// that hands the memory controller to its containers may not hold processes itself (EBUSY), so
// processes live only in the leaves, where the writer finds and pins them; the refused move
// leaves the container's pin as it was.
func TestGuestV2NoInternalProcesses(t *testing.T) {
	m, k := guestKernel(t, cgroup.Cgroupfs)
	if k.version != cgroup.V2 {
		t.Skip("the no-internal-processes rule is cgroup v2's")
	}
	r := guestRef(t, 600, "Burstable")
	k.addContainer(r)
	core := lastCore(m, cpuNodes(m)[0])
	k.apply(r, cgroup.Resources{CPUs: core, Mems: k.mems})
	p := k.startInCgroup(2, "sleep", r)
	ctr := k.dirs(r)[0]
	pod := filepath.Dir(ctr)
	err := os.WriteFile(filepath.Join(pod, "cgroup.procs"), []byte(strconv.Itoa(p.pid)), 0o644)
	if !errors.Is(err, syscall.EBUSY) {
		t.Errorf("moving a process into pod cgroup %s (subtree_control %q): %v, want EBUSY",
			pod, k.read(pod, "cgroup.subtree_control"), err)
	}
	k.verify(p, core, k.mems)
	if res := k.apply(r, cgroup.Resources{CPUs: core, Mems: k.mems}); len(res.Changes) != 0 {
		t.Errorf("re-applying the pin wrote %v, want nothing", changes(res))
	}
}
