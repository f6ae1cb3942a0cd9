package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

// fakeProcesses answers Processes with one process per container, or limit of them with many;
// it records the cgroups asked for.
type fakeProcesses struct {
	mu     sync.Mutex
	asked  []cgroup.ContainerRef
	limits []int
	many   bool
	fail   map[cgroup.ContainerRef]error
}

func (f *fakeProcesses) Processes(ref cgroup.ContainerRef, limit int) (cgroup.Processes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ref)
	f.limits = append(f.limits, limit)
	if err := f.fail[ref]; err != nil {
		return cgroup.Processes{}, err
	}
	n := 1
	if f.many {
		n = limit
	}
	out := cgroup.Processes{Container: ref, Dir: "/sys/fs/cgroup/cpuset/" + ref.String(), Listed: n, Limit: limit}
	for i := range n {
		out.Processes = append(out.Processes, cgroup.Process{PID: 100 + i, Command: "lmp", CPUs: cpuset.New(1), Mems: cpuset.New(0)})
	}
	return out, nil
}

// pinned creates an exclusive pod of one container with the given CPUs, its cgroup and status.
func (e *env) pinned(name string, cpus string, id byte) cgroup.ContainerRef {
	e.t.Helper()
	p := newPod(name, exclusiveLabel, cpus)
	ref := e.container(p, hexID(id))
	e.apply(withStatus(p, hexID(id)))
	return ref
}

func TestProcessesOfPinnedContainers(t *testing.T) {
	procs := &fakeProcesses{fail: map[cgroup.ContainerRef]error{}}
	e := newEnv(t, envOpts{procs: procs})
	if _, err := e.a.Processes(nil); err == nil || !strings.Contains(err.Error(), "not rebuilt its state yet") {
		t.Errorf("Processes before the start = %v, want a not-yet error", err)
	}
	worker := e.pinned("worker", "2", 'b')
	other := e.pinned("another", "1", 'c')
	shared := newPod("web", nil, "500m")
	e.container(shared, hexID('d'))
	e.apply(withStatus(shared, hexID('d')))
	e.start()

	got, err := e.a.Processes(nil)
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, p := range got {
		summary = append(summary, fmt.Sprintf("%s/%s/%s %s numa %d written %t: %d processes, err %v",
			p.Pin.Namespace, p.Pin.Pod, p.Pin.Container, p.Container, p.Pin.NUMANode, p.Pin.Written, len(p.Processes.Processes), p.Err))
	}
	want := []string{
		fmt.Sprintf("ns/another/c0 %s numa 0 written true: 1 processes, err <nil>", other.Container),
		fmt.Sprintf("ns/worker/c0 %s numa 0 written true: 1 processes, err <nil>", worker.Container),
	}
	if d := cmp.Diff(want, summary); d != "" {
		t.Errorf("Processes (-want +got):\n%s", d)
	}
	// The cgroups read are the agent's own refs; the shared container's is never read.
	if d := cmp.Diff([]cgroup.ContainerRef{other, worker}, procs.asked); d != "" {
		t.Errorf("cgroups read (-want +got):\n%s", d)
	}
	asgs := assignmentsOf(e.a)
	for _, p := range got {
		i := slices.IndexFunc(asgs, func(a policy.Assignment) bool {
			return a.Key == policy.Key{PodUID: p.Pin.PodUID, Container: p.Pin.Container}
		})
		if i < 0 || !asgs[i].CPUs.Equals(p.Pin.CPUs) || !asgs[i].Mems.Equals(p.Pin.Mems) {
			t.Errorf("%s/%s: pin %s/%s, not the allocator's %+v", p.Pin.Pod, p.Pin.Container, p.Pin.CPUs, p.Pin.Mems, asgs)
		}
	}

	procs.asked = nil
	procs.fail[worker] = fmt.Errorf("container %s: %w", worker, cgroup.ErrVanished)
	got, err = e.a.Processes([]types.NamespacedName{{Namespace: "ns", Name: "worker"}, {Namespace: "ns", Name: "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Pin.Pod != "worker" || !errors.Is(got[0].Err, cgroup.ErrVanished) || len(procs.asked) != 1 {
		t.Errorf("Processes of ns/worker = %+v, want its vanished container only", got)
	}
}

func TestProcessesBoundedPerListing(t *testing.T) {
	procs := &fakeProcesses{many: true}
	e := newEnv(t, envOpts{procs: procs})
	n := MaxProcessesPerListing/MaxProcessesPerContainer + 1
	for i := range n {
		e.pinned(fmt.Sprint("w", i), "1", byte('a'+i))
	}
	e.start()
	got, err := e.a.Processes(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !errors.Is(got[n-1].Err, ErrListingBound) {
		t.Fatalf("Processes of %d containers: %d entries, last error %v; want the last one over the bound", n, len(got), got[len(got)-1].Err)
	}
	total := 0
	for _, p := range got {
		total += len(p.Processes.Processes)
	}
	if total != MaxProcessesPerListing || len(procs.limits) != n-1 || procs.limits[0] != MaxProcessesPerContainer {
		t.Errorf("read %d processes with limits %v; want %d in all, %d per container", total, procs.limits, MaxProcessesPerListing, MaxProcessesPerContainer)
	}
}

func TestProcessesNotConfigured(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start()
	if _, err := e.a.Processes(nil); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("Processes without a reader = %v", err)
	}
}
