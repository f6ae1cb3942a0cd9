package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
)

// Bounds of one process listing: a container with thousands of processes shows its lowest PIDs
// and its count, so an answer stays small whatever runs on the node.
const (
	// MaxProcessesPerContainer is the most processes read in one container (a worker of a
	// 384-core node runs one rank per core, plus its launcher daemons).
	MaxProcessesPerContainer = 1024
	// MaxProcessesPerListing is the most processes read in one listing, over every container.
	MaxProcessesPerListing = cgroup.MaxProcessLimit
)

// ErrListingBound reports a container left unread because the listing's bound was reached.
var ErrListingBound = fmt.Errorf("not read: the listing's bound of %d processes was reached; ask for fewer pods", MaxProcessesPerListing)

// ProcessReader lists what runs in a container's cgroup (cgroup.ProcessReader).
type ProcessReader interface {
	Processes(ref cgroup.ContainerRef, limit int) (cgroup.Processes, error)
}

// PinnedProcesses is one pinned container's cgroup and what runs in it.
type PinnedProcesses struct {
	Pin report.Pin
	// Container is the runtime's ID of the container whose cgroup was read; a restarted
	// container has a new one.
	Container cgroup.ContainerID
	Processes cgroup.Processes
	// Err says why the processes could not be listed; Processes is empty then.
	Err error
}

// Processes lists what runs in the cgroups of the pinned containers of the given pods (every
// pod with a pin when pods is empty), ordered by namespace, pod, container and container ID.
// The cgroups read are the ones the agent found below kubepods and pins, located from the
// validated pod UID, QoS class and container ID it holds; nothing a pod author wrote names them.
// The state is copied under the lock and the cgroups are read without it.
func (a *Agent) Processes(pods []types.NamespacedName) ([]PinnedProcesses, error) {
	if a.d.Processes == nil {
		return nil, errors.New("process listing is not configured on this agent")
	}
	targets, err := a.pinnedCgroups(pods)
	if err != nil {
		return nil, err
	}
	out := make([]PinnedProcesses, len(targets))
	budget := MaxProcessesPerListing
	for i, t := range targets {
		out[i] = PinnedProcesses{Pin: t.pin, Container: t.ref.Container}
		limit := min(MaxProcessesPerContainer, budget)
		if limit == 0 {
			out[i].Err = ErrListingBound
			continue
		}
		out[i].Processes, out[i].Err = a.d.Processes.Processes(t.ref, limit)
		budget -= len(out[i].Processes.Processes)
	}
	return out, nil
}

// pinnedCgroup is a container cgroup that holds an exclusive pin.
type pinnedCgroup struct {
	ref cgroup.ContainerRef
	pin report.Pin
}

// pinnedCgroups returns the container cgroups holding an exclusive pin of the given pods.
func (a *Agent) pinnedCgroups(pods []types.NamespacedName) ([]pinnedCgroup, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st == nil {
		return nil, errors.New("the agent has not rebuilt its state yet; try again in a few seconds")
	}
	var out []pinnedCgroup
	for ref, c := range a.st.ctrs {
		if c.sandbox || c.name == "" {
			continue
		}
		asg, ok := a.st.alloc.Lookup(policy.Key{PodUID: string(ref.Pod.UID), Container: c.name})
		if !ok {
			continue
		}
		p := report.PinOf(asg)
		p.Written = c.pinned
		if ps := a.st.pods[asg.Key.PodUID]; ps != nil {
			p.Namespace, p.Pod = ps.info.Namespace, ps.info.Name
		}
		if len(pods) > 0 && !slices.Contains(pods, types.NamespacedName{Namespace: p.Namespace, Name: p.Pod}) {
			continue
		}
		out = append(out, pinnedCgroup{ref: ref, pin: p})
	}
	slices.SortFunc(out, func(x, y pinnedCgroup) int {
		return cmp.Or(cmp.Compare(x.pin.Namespace, y.pin.Namespace), cmp.Compare(x.pin.Pod, y.pin.Pod),
			cmp.Compare(x.pin.Container, y.pin.Container), cmp.Compare(x.ref.String(), y.ref.String()))
	})
	return out, nil
}
