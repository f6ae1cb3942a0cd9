package kerneltest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"k8s.io/utils/cpuset"
)

// memHelperEnv makes the test binary a memory helper (TestGuestMemoryHelper).
const memHelperEnv = "FINEGRAIN_VM_MEM_HELPER"

// TestGuestMemoryHelper is not a test: started by the NUMA memory tests with memHelperEnv set,
// it prints "ready", then for every "alloc <MiB>" line on stdin allocates and touches that much
// memory and prints "ok"; it returns when stdin closes.
func TestGuestMemoryHelper(t *testing.T) {
	if os.Getenv(memHelperEnv) == "" {
		t.Skip("helper process of the NUMA memory tests, started by them")
	}
	var keep [][]byte
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var mib int
		if _, err := fmt.Sscanf(sc.Text(), "alloc %d", &mib); err != nil || mib < 1 {
			fmt.Printf("bad command %q\n", sc.Text())
			continue
		}
		b := make([]byte, mib<<20)
		for i := 0; i < len(b); i += os.Getpagesize() {
			b[i] = 1
		}
		keep = append(keep, b)
		fmt.Println("ok")
	}
	runtime.KeepAlive(keep)
}

// memHelper is a running TestGuestMemoryHelper process.
type memHelper struct {
	t     *testing.T
	pid   int
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startMemHelper(t *testing.T, k *kernel, dirs ...string) *memHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuestMemoryHelper$")
	cmd.Env = append(os.Environ(), memHelperEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered after newKernel's cleanup, so it runs first: the helper is gone before its
	// cgroups are removed.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	h := &memHelper{t: t, pid: cmd.Process.Pid, stdin: stdin, out: bufio.NewReader(stdout)}
	h.expect("ready")
	for _, dir := range dirs {
		k.write(dir, "cgroup.procs", strconv.Itoa(h.pid))
	}
	return h
}

func (h *memHelper) expect(want string) {
	h.t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := h.out.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line != want {
			h.t.Fatalf("memory helper %d said %q, want %q", h.pid, line, want)
		}
	case <-time.After(30 * time.Second):
		h.t.Fatalf("memory helper %d: no %q after 30 s", h.pid, want)
	}
}

// alloc makes the helper allocate and touch mib MiB.
func (h *memHelper) alloc(mib int) {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.stdin, "alloc %d\n", mib); err != nil {
		h.t.Fatal(err)
	}
	h.expect("ok")
}

// anonPages returns the helper's anonymous pages per NUMA node, from /proc/<pid>/numa_maps.
func (h *memHelper) anonPages() map[int]int {
	h.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/numa_maps", h.pid))
	if err != nil {
		h.t.Fatal(err)
	}
	pages := map[int]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, " anon=") {
			continue
		}
		for _, f := range strings.Fields(line) {
			var node, n int
			if _, err := fmt.Sscanf(f, "N%d=%d", &node, &n); err == nil {
				pages[node] += n
			}
		}
	}
	return pages
}

// share returns the fraction of the pages in after but not in before that lie on node.
func share(before, after map[int]int, node int) (float64, int) {
	total := 0
	for n, c := range after {
		total += c - before[n]
	}
	if total <= 0 {
		return 0, total
	}
	return float64(after[node]-before[node]) / float64(total), total
}

// TestGuestPinnedMemoryIsLocal pins a process's memory to each NUMA node in turn (memory-only
// nodes included, with CPUs of node 0) and checks where the pages it then allocates really land;
// on cgroup v2 the pages it already had must follow it as well.
func TestGuestPinnedMemoryIsLocal(t *testing.T) {
	m, k := guestKernel(t, cgroup.Cgroupfs)
	if len(m.Nodes) < 2 {
		t.Skipf("needs 2 NUMA nodes, the guest has %d", len(m.Nodes))
	}
	for id := range m.Nodes {
		r := guestRef(t, 200+id, "Guaranteed")
		k.addContainer(r)
		h := startMemHelper(t, k, k.dirs(r)...)
		h.alloc(16) // pages from before the pin, wherever the kernel put them
		cpus := lastCore(m, id)
		if cpus.IsEmpty() {
			cpus = lastCore(m, 0) // a memory-only node: run on node 0, allocate from id
		}
		mems := cpuset.New(id)
		if res := k.apply(r, cgroup.Resources{CPUs: cpus, Mems: mems}); !res.EffectiveMems.Equals(mems) {
			t.Fatalf("node %d: effective mems %s, want %s", id, res.EffectiveMems, mems)
		}
		before := h.anonPages()
		if k.version == cgroup.V2 {
			total, off := 0, 0
			for n, c := range before {
				total += c
				if n != id {
					off += c
				}
			}
			// cgroup v2 migrates a task's pages when its cpuset.mems changes.
			if off*20 > total {
				t.Errorf("node %d: %d of %d anonymous pages stayed off the node after the pin: %v", id, off, total, before)
			}
		}
		h.alloc(64)
		frac, pages := share(before, h.anonPages(), id)
		t.Logf("node %d (CPUs %s): %.1f%% of %d new pages local, before the allocation %v", id, cpus, 100*frac, pages, before)
		if pages < 64<<20/os.Getpagesize()*9/10 || frac < 0.95 {
			t.Errorf("node %d: %.1f%% of %d new pages on the pinned node, want at least 95%% of about %d", id, 100*frac, pages, 64<<20/os.Getpagesize())
		}
	}
}

// TestGuestPinMovesEarlyPages: a container pinned after it started (the inotify and informer
// paths) may already hold pages on another NUMA node. The values the node agent writes for an
// exclusive pin (cgroup.Exclusive) move them to the pinned node: on cgroup v1 through
// cpuset.memory_migrate, set before the mems change. Plain cpus and mems show why the flag is
// needed — v1 leaves the pages where they are (which also proves this test can tell) — and
// that v2 migrates without it.
func TestGuestPinMovesEarlyPages(t *testing.T) {
	m, k := guestKernel(t, cgroup.Cgroupfs)
	nodes := cpuNodes(m)
	if len(nodes) < 2 {
		t.Skipf("needs 2 NUMA nodes with CPUs, the guest has %d", len(nodes))
	}
	from, to := nodes[0], nodes[1]
	pinCPUs, pinMems := lastCore(m, to), cpuset.New(to)
	for i, tc := range []struct {
		name  string
		want  cgroup.Resources
		moves bool
	}{
		{"exclusive pin", cgroup.Exclusive(pinCPUs, pinMems), true},
		{"cpus and mems without migration", cgroup.Resources{CPUs: pinCPUs, Mems: pinMems}, k.version == cgroup.V2},
	} {
		r := guestRef(t, 300+i, "Guaranteed")
		k.addContainer(r)
		// Before its pin the container ran, and allocated, on the other node.
		k.apply(r, cgroup.Resources{CPUs: lastCore(m, from), Mems: cpuset.New(from)})
		h := startMemHelper(t, k, k.dirs(r)...)
		const mib = 16
		h.alloc(mib)
		early := h.anonPages()
		least := mib << 20 / os.Getpagesize() * 9 / 10
		if early[from] < least {
			t.Fatalf("%s: %d anonymous pages on node %d before the pin, want at least %d: %v", tc.name, early[from], from, least, early)
		}
		res := k.apply(r, tc.want)
		if !res.EffectiveMems.Equals(pinMems) {
			t.Fatalf("%s: effective mems %s, want %s", tc.name, res.EffectiveMems, pinMems)
		}
		after := h.anonPages()
		total := 0
		for _, n := range after {
			total += n
		}
		t.Logf("%s on %s: before the pin %v, after it %v (node %d: %d of %d pages)", tc.name, k.version, early, after, to, after[to], total)
		switch {
		case tc.moves && (after[to]*20 < total*19):
			t.Errorf("%s: %d of %d anonymous pages on the pinned node %d after the pin, want at least 95%%: %v", tc.name, after[to], total, to, after)
		case !tc.moves && after[from]*2 < early[from]:
			t.Errorf("%s: cgroup v1 moved %d of %d pages off node %d without cpuset.memory_migrate; the exclusive case proves nothing if the kernel migrates anyway", tc.name, early[from]-after[from], early[from], from)
		}
		if k.version == cgroup.V1 {
			dir, err := k.layout.ContainerDir(cgroup.CPUSet, r)
			if err != nil {
				t.Fatal(err)
			}
			want := "0"
			if tc.want.MigrateMemory {
				want = "1"
			}
			if got := k.read(dir, "cpuset.memory_migrate"); got != want {
				t.Errorf("%s: %s/cpuset.memory_migrate = %s, want %s", tc.name, dir, got, want)
			}
		}
	}
}
