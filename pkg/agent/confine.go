package agent

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
)

// Event reasons and error reasons of the confinement of Slurm jobs' processes.
const (
	ReasonSlurmJobConfined      = "SlurmJobConfined"
	ReasonSlurmJobNoPlaceholder = "SlurmJobWithoutPlaceholder"

	// ErrSlurmNoPlaceholder counts jobs whose processes run in a slurmd container of this node
	// without a pinned placeholder of their virtual cluster here; ErrSlurmConfine failed reads
	// and moves.
	ErrSlurmNoPlaceholder ErrorReason = "slurm-job-without-placeholder"
	ErrSlurmConfine       ErrorReason = "slurm-confine"
)

// ProcessMover moves processes into a container's cgroup (cgroup.FS.MoveProcesses).
type ProcessMover interface {
	MoveProcesses(ref cgroup.ContainerRef, pids []int) ([]int, error)
}

// slurmSet is one virtual cluster's slurmd on this node and the placeholders of its jobs here,
// all taken from the agent's own state: pods it classified as trusted (classify.SlurmRole), and
// container cgroups it located itself and pinned.
type slurmSet struct {
	// pod is the slurmd pod (for events), slurmd its slurmd container's cgroups (one, or two
	// while a restarted container's old cgroup lingers).
	pod    classify.Pod
	slurmd []cgroup.ContainerRef
	// placeholders are the pinned placeholder containers of the cluster's jobs on this node.
	placeholders map[slurm.JobID]cgroup.ContainerRef
}

// SlurmConfinement is what one pass of the confinement did.
type SlurmConfinement struct {
	// Moved are the processes moved, by job.
	Moved map[slurm.JobID][]int
	// Unplaced are jobs with processes in a slurmd container but no pinned placeholder of their
	// virtual cluster on this node: their processes were left where they are.
	Unplaced []slurm.JobID
	Errors   []error
}

// confineEnabled reports whether the agent confines Slurm jobs' processes.
func (a *Agent) confineEnabled() bool {
	return a.d.Mover != nil && a.d.SlurmProcesses != nil && a.d.Processes != nil
}

// slurmSets collects, under the lock, the virtual clusters' slurmd containers on this node and
// their jobs' pinned placeholders. A placeholder pairs with a slurmd only when both are in the
// same namespace and reference the same VirtualCluster UID; a placeholder counts only once the
// agent wrote its exclusive pin.
func (a *Agent) slurmSets() []slurmSet {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st == nil {
		return nil
	}
	type key struct{ namespace, owner string }
	sets := map[key][]*slurmSet{}
	placeholders := map[key]map[slurm.JobID]cgroup.ContainerRef{}
	for uid, ps := range a.st.pods {
		role := ps.info.Slurm
		if role == nil || ps.info.Terminal {
			continue
		}
		k := key{ps.info.Namespace, role.Owner}
		refs := a.st.namedContainers(uid, containerOf(role))
		if role.Slurmd {
			if len(refs) > 0 {
				sets[k] = append(sets[k], &slurmSet{pod: ps.info, slurmd: refs})
			}
			continue
		}
		for _, ref := range refs {
			if !a.st.ctrs[ref].pinned {
				continue
			}
			if _, ok := a.st.alloc.Lookup(policy.Key{PodUID: uid, Container: classify.PlaceholderContainer}); !ok {
				continue
			}
			if placeholders[k] == nil {
				placeholders[k] = map[slurm.JobID]cgroup.ContainerRef{}
			}
			placeholders[k][role.Job] = ref
		}
	}
	var out []slurmSet
	for k, ss := range sets {
		for _, s := range ss {
			s.placeholders = placeholders[k]
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(x, y slurmSet) int {
		return cmp.Or(cmp.Compare(x.pod.Namespace, y.pod.Namespace), cmp.Compare(x.pod.Name, y.pod.Name))
	})
	return out
}

func containerOf(r *classify.SlurmRole) string {
	if r.Slurmd {
		return classify.SlurmdContainer
	}
	return classify.PlaceholderContainer
}

// namedContainers returns the known cgroups of a pod's container of that name, in ref order.
func (s *state) namedContainers(uid, name string) []cgroup.ContainerRef {
	var out []cgroup.ContainerRef
	for _, ref := range s.podContainers(uid) {
		if c := s.ctrs[ref]; !c.sandbox && c.name == name {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, func(x, y cgroup.ContainerRef) int { return cmp.Compare(x.String(), y.String()) })
	return out
}

// ConfineSlurmJobs moves the processes of Slurm jobs that run in a virtual cluster's slurmd
// container on this node into the cgroup of their job's placeholder container, which holds the
// job's pinned CPUs and NUMA memory (docs/slurm.md, "Confinement of the job's
// processes"). Which job a process runs for comes from its slurmstepd ancestor
// (slurm.JobProcesses); the job ID only selects among the pinned placeholders of the same virtual
// cluster, and the cgroup is the one the agent located itself. A job with no such placeholder
// here is left where it runs and reported once (log, Warning event on the slurmd pod, error
// counter). Processes already moved are not listed in the slurmd container and are not touched
// again; processes of a job whose placeholder is gone stay where they are (the bridge ends the
// job when its placeholders go). It runs on every tick.
func (a *Agent) ConfineSlurmJobs() SlurmConfinement {
	res := SlurmConfinement{Moved: map[slurm.JobID][]int{}}
	seen := map[string]bool{}
	for _, s := range a.slurmSets() {
		a.confineSet(s, &res, seen)
	}
	for k := range a.slurmReported {
		if !seen[k] {
			delete(a.slurmReported, k)
		}
	}
	logged := map[string]bool{}
	for _, err := range res.Errors {
		a.hooks.Failed(ErrSlurmConfine)
		msg := err.Error()
		if !a.slurmErrs[msg] {
			a.log.Error("cannot confine a Slurm job's processes; retrying at the next tick", "reason", msg)
		}
		logged[msg] = true
	}
	a.slurmErrs = logged
	return res
}

// confineSet confines the jobs of one slurmd pod.
func (a *Agent) confineSet(s slurmSet, res *SlurmConfinement, seen map[string]bool) {
	inSlurmd := map[int]bool{}
	var pids []int
	for _, ref := range s.slurmd {
		ps, err := a.d.Processes.Processes(ref, MaxProcessesPerContainer)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("slurmd of virtual cluster %s (pod %s/%s): %w", s.pod.Slurm.Cluster, s.pod.Namespace, s.pod.Name, err))
			return
		}
		for _, p := range ps.Processes {
			inSlurmd[p.PID] = true
			pids = append(pids, p.PID)
		}
	}
	if len(pids) == 0 {
		return
	}
	// The placeholders' processes complete the parent chains: a process forked while its parent
	// was being moved stays behind in slurmd, its parent now in the placeholder.
	for _, ref := range s.placeholders {
		ps, err := a.d.Processes.Processes(ref, MaxProcessesPerContainer)
		if err != nil {
			continue // a placeholder that vanished has no processes to follow
		}
		for _, p := range ps.Processes {
			pids = append(pids, p.PID)
		}
	}
	procs, err := a.d.SlurmProcesses(pids)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("processes of virtual cluster %s's slurmd (pod %s/%s): %w", s.pod.Slurm.Cluster, s.pod.Namespace, s.pod.Name, err))
		return
	}
	jobs := slurm.JobProcesses(procs)
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		var move []int
		for _, pid := range jobs[id] {
			if inSlurmd[pid] {
				move = append(move, pid)
			}
		}
		if len(move) == 0 {
			continue
		}
		ref, ok := s.placeholders[id]
		if !ok {
			a.reportUnplaced(s, id, move, seen)
			res.Unplaced = append(res.Unplaced, id)
			continue
		}
		moved, err := a.d.Mover.MoveProcesses(ref, move)
		if len(moved) > 0 {
			res.Moved[id] = append(res.Moved[id], moved...)
			a.hooks.SlurmProcessesConfined(len(moved))
			a.log.Info("Slurm job's processes confined to its placeholder", "virtualCluster", s.pod.Slurm.Cluster,
				"namespace", s.pod.Namespace, "job", id.String(), "pids", moved, "container", ref.String())
			a.d.Recorder.Eventf(podRef(s.pod), corev1.EventTypeNormal, ReasonSlurmJobConfined,
				"%d processes of Slurm job %s moved to the cgroup of its placeholder's pinned container %s", len(moved), id, ref)
		}
		if errors.Is(err, fs.ErrPermission) {
			err = fmt.Errorf("%w: moving a process that holds capabilities (slurmstepd, root in its container) into another cpuset takes CAP_SYS_NICE; give the node agent's container capabilities {drop: [ALL], add: [SYS_NICE]} (docs/slurm.md, \"Confinement\")", err)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("Slurm job %s of virtual cluster %s: %w", id, s.pod.Slurm.Cluster, err))
		}
	}
}

// reportUnplaced says once per job and slurmd pod that a job's processes run without a
// placeholder to confine them to.
func (a *Agent) reportUnplaced(s slurmSet, id slurm.JobID, pids []int, seen map[string]bool) {
	k := s.pod.UID + "/" + id.String()
	seen[k] = true
	a.hooks.Failed(ErrSlurmNoPlaceholder)
	if a.slurmReported[k] {
		return
	}
	a.slurmReported[k] = true
	msg := fmt.Sprintf("Slurm job %s has %d processes in slurmd but no placeholder of virtual cluster %s pinned on this node: they stay in the shared pool",
		id, len(pids), s.pod.Slurm.Cluster)
	a.log.Warn(msg, "namespace", s.pod.Namespace, "pod", s.pod.Name, "pids", pids)
	a.d.Recorder.Event(podRef(s.pod), corev1.EventTypeWarning, ReasonSlurmJobNoPlaceholder, msg)
}
