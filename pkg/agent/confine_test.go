package agent

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/agent/cri"
	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// fakeHost is a node's processes and which container cgroup holds each: the agent's
// ProcessReader, SlurmProcesses and ProcessMover at once. A move puts the process in the
// destination, as the kernel does.
type fakeHost struct {
	mu    sync.Mutex
	procs map[int]slurm.Process
	in    map[int]cgroup.ContainerRef
	moves []string
	// refuse, when set, is MoveProcesses's error.
	refuse error
}

func (h *fakeHost) add(ref cgroup.ContainerRef, ps ...slurm.Process) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range ps {
		h.procs[p.PID] = p
		h.in[p.PID] = ref
	}
}

func (h *fakeHost) Processes(ref cgroup.ContainerRef, limit int) (cgroup.Processes, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := cgroup.Processes{Container: ref, Limit: limit}
	for pid, r := range h.in {
		if r == ref {
			out.Processes = append(out.Processes, cgroup.Process{PID: pid})
		}
	}
	slices.SortFunc(out.Processes, func(a, b cgroup.Process) int { return a.PID - b.PID })
	out.Listed = len(out.Processes)
	return out, nil
}

func (h *fakeHost) read(pids []int) ([]slurm.Process, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slurm.Process
	for _, pid := range pids {
		if p, ok := h.procs[pid]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (h *fakeHost) MoveProcesses(ref cgroup.ContainerRef, pids []int) ([]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse != nil {
		return nil, h.refuse
	}
	for _, pid := range pids {
		h.in[pid] = ref
	}
	h.moves = append(h.moves, fmt.Sprintf("%v -> %s", pids, ref.Container.ID[:1]))
	return pids, nil
}

func (h *fakeHost) where(pid int) cgroup.ContainerRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.in[pid]
}

const vcUID = "7a7a7a7a-1111-4222-8333-944455556666"

func vcOwner(name, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.VirtualClusterKind, Name: name,
		UID: types.UID(uid), Controller: &controller}
}

// slurmdOf is a virtual cluster's node pod (Burstable, one slurmd container) as the
// VirtualCluster controller makes it; owners nil leaves it with labels only.
func slurmdOf(name, namespace string, owners ...metav1.OwnerReference) *corev1.Pod {
	p := newPod(name, map[string]string{v1alpha1.LabelVirtualCluster: "vc1", v1alpha1.LabelRole: v1alpha1.RoleSlurmd}, "250m")
	p.Namespace, p.OwnerReferences = namespace, owners
	p.Status.QOSClass = corev1.PodQOSBurstable
	p.Spec.Containers[0].Name = classify.SlurmdContainer
	return p
}

// placeholderOf is a job's placeholder pod as the bridge makes it: one exclusive CPU.
func placeholderOf(name string, job slurm.JobID, owner metav1.OwnerReference) *corev1.Pod {
	p := newPod(name, map[string]string{v1alpha1.LabelVirtualCluster: "vc1", classify.LabelWorkload: classify.WorkloadSlurmJob,
		classify.LabelSlurmJob: job.String(), classify.LabelPinning: classify.PinningExclusive}, "1")
	p.OwnerReferences = []metav1.OwnerReference{owner}
	p.Spec.SchedulerName = classify.DefaultPlacerSchedulerName
	p.Spec.Containers[0].Name = classify.PlaceholderContainer
	return p
}

const stepd = "slurmstepd"

// runPods starts the pods' one container each on the agent (the runtime names it, its cgroup
// appears) and returns their cgroups by pod name.
func (e *env) runPods(pods ...*corev1.Pod) map[string]cgroup.ContainerRef {
	refs := map[string]cgroup.ContainerRef{}
	for i, p := range pods {
		id := hexID("abcdefghij"[i])
		e.apply(withStatus(p, id))
		e.a.DrainPods(context.Background())
		refs[p.Name] = e.container(p, id)
		e.resolver.set(id, cri.Identity{PodUID: string(p.UID), Name: p.Spec.Containers[0].Name})
		e.appeared(refs[p.Name])
	}
	return refs
}

// TestConfineSlurmJobs moves the processes of a job that runs in a trusted slurmd container into
// its pinned placeholder's cgroup, and nothing else: not a job of no placeholder here (reported
// once), not a process that only calls itself a slurmstepd (by title, or by name and title as a
// user), not a slurmstepd of another job started below the job's processes (it stays with the
// job: moved into the job's placeholder), not the slurmstepd of a pod that only
// carries slurmd's labels, not one of a slurmd of another namespace, and not into the placeholder
// of another VirtualCluster of the same name. A process left behind by a move (forked meanwhile)
// follows at the next pass; moved processes are not moved again.
func TestConfineSlurmJobs(t *testing.T) {
	host := &fakeHost{procs: map[int]slurm.Process{}, in: map[int]cgroup.ContainerRef{}}
	e := newEnv(t, envOpts{procs: host})
	e.a.d.Mover, e.a.d.SlurmProcesses = host, host.read
	if !e.a.confineEnabled() {
		t.Fatal("confinement disabled with a mover, a process reader and a /proc reader")
	}
	e.start()

	owner := vcOwner("vc1", vcUID, true)
	slurmd := slurmdOf("vc1-slurmd-node-a", "ns", owner)
	forged := slurmdOf("forged", "ns")
	elsewhere := slurmdOf("vc1-slurmd-other-ns", "other", owner)
	job42 := placeholderOf("vc1-slurm-42-0", 42, vcOwner("vc1", vcUID, false))
	otherVC := placeholderOf("vc1-slurm-43-0", 43, vcOwner("vc1", "8b8b8b8b-1111-4222-8333-944455556666", false))
	refs := e.runPods(slurmd, forged, elsewhere, job42, otherVC)
	if cpus, _ := e.cpus(refs[job42.Name]); cpus.Size() != 1 {
		t.Fatalf("job 42's placeholder carries %s, want one pinned CPU", cpus)
	}

	host.add(refs[slurmd.Name],
		slurm.Process{PID: 1, Comm: "slurmd", Title: "/usr/sbin/slurmd -D"},
		slurm.Process{PID: 10, PPID: 1, Comm: stepd, Title: "slurmstepd: [42.batch]"},
		slurm.Process{PID: 11, PPID: 10, Comm: "bash", Title: "/bin/bash /var/spool/slurmd/job00042/slurm_script"},
		slurm.Process{PID: 12, PPID: 11, Comm: "mpirun", Title: "mpirun -np 2 ./app"},
		slurm.Process{PID: 20, PPID: 1, Comm: stepd, Title: "slurmstepd: [43.batch]"},
		slurm.Process{PID: 21, PPID: 20, Comm: "sleep", Title: "sleep 100"},
		slurm.Process{PID: 30, PPID: 1, Comm: "python3", Title: "slurmstepd: [42.0]"},
		slurm.Process{PID: 31, PPID: 30, Comm: "yes", Title: "yes"},
		slurm.Process{PID: 32, PPID: 1, Comm: stepd, UID: 1000, Title: "slurmstepd: [42.1]"},
		slurm.Process{PID: 15, PPID: 12, Comm: stepd, Title: "slurmstepd: [43.0]"},
	)
	host.add(refs[forged.Name], slurm.Process{PID: 40, Comm: stepd, Title: "slurmstepd: [42.0]"},
		slurm.Process{PID: 41, PPID: 40, Comm: "yes", Title: "yes"})
	host.add(refs[elsewhere.Name], slurm.Process{PID: 50, Comm: stepd, Title: "slurmstepd: [42.1]"})

	res := e.a.ConfineSlurmJobs()
	if d := cmp.Diff(map[slurm.JobID][]int{42: {10, 11, 12, 15}}, res.Moved); d != "" || len(res.Errors) > 0 {
		t.Errorf("first pass moved (-want +got):\n%s\nerrors %v", d, res.Errors)
	}
	// Job 43 is reported twice: by this node's slurmd (its placeholder is another
	// VirtualCluster's) and by the other namespace's (no placeholder of its own there).
	if d := cmp.Diff([]slurm.JobID{43, 42}, res.Unplaced); d != "" {
		t.Errorf("unplaced jobs (-want +got):\n%s", d)
	}
	for pid, want := range map[int]string{1: slurmd.Name, 20: slurmd.Name, 21: slurmd.Name, 30: slurmd.Name, 31: slurmd.Name, 32: slurmd.Name, 15: job42.Name,
		40: forged.Name, 41: forged.Name, 50: elsewhere.Name, 10: job42.Name, 11: job42.Name, 12: job42.Name} {
		if got := host.where(pid); got != refs[want] {
			t.Errorf("process %d is in %s, want %s's container", pid, got, want)
		}
	}
	if evs := e.eventsWith(ReasonSlurmJobNoPlaceholder); len(evs) != 2 {
		t.Errorf("events %v, want one %s for job 43 in ns and one for job 42 in other", evs, ReasonSlurmJobNoPlaceholder)
	}
	if evs := e.eventsWith(ReasonSlurmJobConfined); len(evs) != 0 {
		t.Errorf("confined events drained with the others: %v", evs)
	}

	// The script forked while it was moved: the child stays in slurmd, its parent is in the
	// placeholder; it follows now. Nothing else moves, and job 43 is not reported again.
	host.add(refs[slurmd.Name], slurm.Process{PID: 13, PPID: 11, Comm: "srun", Title: "srun ./app"})
	host.moves = nil
	res = e.a.ConfineSlurmJobs()
	if d := cmp.Diff(map[slurm.JobID][]int{42: {13}}, res.Moved); d != "" {
		t.Errorf("second pass moved (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"[13] -> d"}, host.moves); d != "" {
		t.Errorf("moves (-want +got):\n%s", d)
	}
	if evs := e.eventsWith(ReasonSlurmJobNoPlaceholder); len(evs) != 0 {
		t.Errorf("job without placeholder reported again: %v", evs)
	}
	host.moves = nil
	if res = e.a.ConfineSlurmJobs(); len(res.Moved) != 0 || len(host.moves) != 0 {
		t.Errorf("third pass moved %v (%v), want nothing: every process of job 42 is in place", res.Moved, host.moves)
	}
	if n := e.hooks.failures[ErrSlurmNoPlaceholder]; n != 6 {
		t.Errorf("%d counted jobs without placeholder, want 2 a pass", n)
	}
	if n := e.hooks.confined; n != 5 {
		t.Errorf("%d processes counted as confined, want 5", n)
	}

	// Through the loop's tick as well: a new step's slurmstepd is moved.
	host.add(refs[slurmd.Name], slurm.Process{PID: 14, PPID: 1, Comm: stepd, Title: "slurmstepd: [42.0]"})
	e.a.Tick(context.Background())
	if got := host.where(14); got != refs[job42.Name] {
		t.Errorf("the tick left job 42's new step in %s", got)
	}
}

// Without a placeholder the agent pinned, a job's processes stay where they are: a placeholder
// pod whose container does not exist yet, one the agent could not pin (more CPUs than the node
// has), or a placeholder pod that is gone.
func TestConfineSlurmJobsWaitsForThePin(t *testing.T) {
	e, host, sref := confineEnv(t)
	host.add(sref, slurm.Process{PID: 10, PPID: 1, Comm: stepd, Title: "slurmstepd: [42.batch]"})

	job42 := placeholderOf("vc1-slurm-42-0", 42, vcOwner("vc1", vcUID, false))
	e.apply(withStatus(job42, hexID('b')))
	e.a.DrainPods(context.Background())
	if res := e.a.ConfineSlurmJobs(); len(res.Moved) != 0 || !slices.Equal(res.Unplaced, []slurm.JobID{42}) {
		t.Errorf("before the placeholder's container exists: %+v, want job 42 unplaced", res)
	}
	huge := placeholderOf("vc1-slurm-44-0", 44, vcOwner("vc1", vcUID, false))
	huge.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("16")
	huge.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("16")
	e.apply(withStatus(huge, hexID('c')))
	e.a.DrainPods(context.Background())
	href := e.container(huge, hexID('c'))
	e.resolver.set(hexID('c'), cri.Identity{PodUID: string(huge.UID), Name: classify.PlaceholderContainer})
	e.appeared(href)
	host.add(sref, slurm.Process{PID: 20, PPID: 1, Comm: stepd, Title: "slurmstepd: [44.batch]"})
	if res := e.a.ConfineSlurmJobs(); len(res.Moved) != 0 || !slices.Equal(res.Unplaced, []slurm.JobID{42, 44}) || host.where(20) != sref {
		t.Errorf("with an unpinned placeholder: %+v, want jobs 42 and 44 unplaced", res)
	}
	pref := e.pinnedPlaceholder(job42, hexID('b'))
	if res := e.a.ConfineSlurmJobs(); !slices.Equal(res.Moved[42], []int{10}) {
		t.Errorf("once pinned: %+v, want process 10 moved", res)
	}

	e.remove(job42)
	e.a.DrainPods(context.Background())
	host.add(sref, slurm.Process{PID: 11, PPID: 1, Comm: stepd, Title: "slurmstepd: [42.0]"})
	if res := e.a.ConfineSlurmJobs(); len(res.Moved) != 0 || host.where(11) != sref || host.where(10) != pref {
		t.Errorf("after the placeholder is gone: %+v; process 11 in %s, 10 in %s; want both left where they are", res, host.where(11), host.where(10))
	}
}

// A move the kernel refuses for want of a capability says which one the agent needs.
func TestConfineSlurmJobsSaysWhatTheMoveNeeds(t *testing.T) {
	e, host, sref := confineEnv(t)
	host.refuse = &fs.PathError{Op: "write", Path: "/sys/fs/cgroup/cpuset/kubepods/cgroup.procs", Err: syscall.EPERM}
	host.add(sref, slurm.Process{PID: 10, PPID: 1, Comm: stepd, Title: "slurmstepd: [42.batch]"})
	job42 := placeholderOf("vc1-slurm-42-0", 42, vcOwner("vc1", vcUID, false))
	e.apply(withStatus(job42, hexID('b')))
	e.a.DrainPods(context.Background())
	e.pinnedPlaceholder(job42, hexID('b'))
	res := e.a.ConfineSlurmJobs()
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "CAP_SYS_NICE") || len(res.Moved) != 0 || host.where(10) != sref {
		t.Errorf("with the move refused: %+v, want one error naming CAP_SYS_NICE and process 10 left in slurmd", res)
	}
	if n := e.hooks.failures[ErrSlurmConfine]; n != 1 {
		t.Errorf("%d counted confinement errors, want 1", n)
	}
}

// pinnedPlaceholder makes the container of a placeholder pod appear, which the agent pins.
func (e *env) pinnedPlaceholder(p *corev1.Pod, id string) cgroup.ContainerRef {
	ref := e.container(p, id)
	e.resolver.set(id, cri.Identity{PodUID: string(p.UID), Name: classify.PlaceholderContainer})
	e.appeared(ref)
	return ref
}

// confineEnv is an agent confining Slurm jobs on fakes, with one trusted slurmd pod of virtual
// cluster vc1 in namespace ns whose slurmd container cgroup it returns.
func confineEnv(t *testing.T) (*env, *fakeHost, cgroup.ContainerRef) {
	t.Helper()
	host := &fakeHost{procs: map[int]slurm.Process{}, in: map[int]cgroup.ContainerRef{}}
	e := newEnv(t, envOpts{procs: host})
	e.a.d.Mover, e.a.d.SlurmProcesses = host, host.read
	e.start()
	slurmd := slurmdOf("vc1-slurmd-node-a", "ns", vcOwner("vc1", vcUID, true))
	e.apply(withStatus(slurmd, hexID('a')))
	e.a.DrainPods(context.Background())
	sref := e.container(slurmd, hexID('a'))
	e.resolver.set(hexID('a'), cri.Identity{PodUID: string(slurmd.UID), Name: classify.SlurmdContainer})
	e.appeared(sref)
	return e, host, sref
}
