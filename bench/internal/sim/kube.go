package sim

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/finegrain-dev/finegrain/bench/internal/kubelet"
	"github.com/finegrain-dev/finegrain/pkg/placer/hpcjob"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// kubeNode is a node as kube-scheduler and the kubelet see it.
type kubeNode struct {
	reqMilli, reqMem int64
	// free are the CPUs the static CPU manager can still hand out.
	free kubelet.Free
}

// kubeHold is one container of a running job: under the static CPU manager, its CPUs and how
// many of them lie in each NUMA node (in topology order).
type kubeHold struct {
	node        int
	milli, mem  int64
	cpus        []int
	cpusPerNUMA []int
}

// kube models default Kubernetes: kube-scheduler filters nodes on their allocatable CPU and
// memory minus the requests bound there and scores them with NodeResourcesFit's LeastAllocated
// strategy (CPU and memory weighted equally, integer scores 0–100 as kube-scheduler computes
// them; ties go to the first node by name, where kube-scheduler picks one at random). It knows
// no NUMA nodes. With the static CPU manager (KubeStatic) the kubelet then gives each container
// exclusive CPUs as bench/internal/kubelet models it, without topology-manager alignment
// (takeByTopologyNUMAPacked over the whole node: whole NUMA nodes, whole cores, then threads,
// fullest NUMA node first, spanning NUMA nodes when it must); under the topology manager's
// best-effort policy (KubeStaticBestEffort) from the lowest-numbered NUMA node that has room for
// the whole container, spanning only when none has. Without it every container floats
// over the whole node. A job's containers are bound all together or not at all.
type kube struct {
	strategy Strategy
	static   bool
	// bestEffort aligns a container to one NUMA node when one has room (topology manager
	// best-effort).
	bestEffort bool
	topo       *topology.Topology
	cm         *kubelet.CPUManager
	// staticSize is each NUMA node's CPUs the static CPU manager may hand out.
	staticSize       []int
	maxNUMA          int
	allocMilli, mem  int64
	nodes            []kubeNode
	held             [][]kubeHold
	scratchMilli     []int64
	scratchMem       []int64
	scratchContainer []int
	// version counts placements and releases.
	version uint64
}

func newKube(s Strategy, topo *topology.Topology, nodes, reserved, jobs int) *kube {
	k := &kube{
		strategy: s, static: s.Deployment == KubeStatic || s.Deployment == KubeStaticBestEffort,
		bestEffort: s.Deployment == KubeStaticBestEffort, topo: topo, cm: kubelet.New(topo), maxNUMA: maxNUMACPUs(topo),
		allocMilli: int64(topo.NumCPUs()-reserved) * 1000, nodes: make([]kubeNode, nodes), held: make([][]kubeHold, jobs),
		scratchMilli: make([]int64, nodes), scratchMem: make([]int64, nodes),
	}
	for _, n := range topo.NUMANodes {
		k.mem += int64(n.MemoryBytes)
	}
	// The static CPU manager's free CPUs: all but the reserved ones, which the kubelet chooses
	// with its own packing rule.
	free := k.cm.Free(topo.OnlineCPUs)
	k.cm.TakePacked(free, reserved, topology.NoNUMA)
	k.staticSize = k.perNUMA(free)
	for i := range k.nodes {
		k.nodes[i].free = slices.Clone(free)
	}
	return k
}

// perNUMA counts free CPUs per NUMA node, in topology order.
func (k *kube) perNUMA(free kubelet.Free) []int {
	out := make([]int, len(k.topo.NUMANodes))
	for z, n := range k.topo.NUMANodes {
		for _, cpu := range n.CPUs.UnsortedList() {
			if free[cpu] {
				out[z]++
			}
		}
	}
	return out
}

// countPerNUMA counts cpus per NUMA node, in topology order.
func (k *kube) countPerNUMA(cpus []int) []int {
	out := make([]int, len(k.topo.NUMANodes))
	for _, cpu := range cpus {
		out[k.topo.NUMANodeIndex(k.topo.NUMANodeOfCPU(cpu))]++
	}
	return out
}

// containers returns the tasks of each of job r's containers.
func (k *kube) containers(r *run) []int {
	tasks := int(r.job.Spec.Tasks)
	n := userWorkers(r.job, k.maxNUMA)
	if k.strategy.Containers == PerNode {
		n = min(len(k.nodes), tasks)
	}
	return hpcjob.SplitTasks(tasks, n)
}

func (k *kube) place(r *run) (attempt, error) {
	cpu := r.job.Spec.TaskResources.CPU.Value()
	mem := r.job.Spec.TaskResources.Memory.Value()
	sizes := k.containers(r)
	for i := range k.nodes {
		k.scratchMilli[i], k.scratchMem[i] = k.nodes[i].reqMilli, k.nodes[i].reqMem
	}
	chosen := k.scratchContainer[:0]
	for ci, t := range sizes {
		milli, m := int64(t)*cpu*1000, int64(t)*mem
		best, bestScore := -1, int64(-1)
		for n := range k.nodes {
			um, ux := k.scratchMilli[n]+milli, k.scratchMem[n]+m
			if um > k.allocMilli || ux > k.mem {
				continue
			}
			score := ((k.allocMilli-um)*100/k.allocMilli + (k.mem-ux)*100/k.mem) / 2
			if score > bestScore {
				best, bestScore = n, score
			}
		}
		if best < 0 {
			k.scratchContainer = chosen
			return attempt{reason: fmt.Sprintf("container %d of %d (%d CPUs) fits none of %d nodes (insufficient cpu or memory)", ci+1, len(sizes), milli/1000, len(k.nodes))}, nil
		}
		k.scratchMilli[best] += milli
		k.scratchMem[best] += m
		chosen = append(chosen, best)
	}
	k.scratchContainer = chosen
	placed := make([]Placed, len(sizes))
	holds := make([]kubeHold, len(sizes))
	for ci, t := range sizes {
		n := &k.nodes[chosen[ci]]
		h := kubeHold{node: chosen[ci], milli: int64(t) * cpu * 1000, mem: int64(t) * mem}
		n.reqMilli += h.milli
		n.reqMem += h.mem
		placed[ci] = Placed{Node: h.node, Tasks: t, Threads: t * int(cpu)}
		if k.static {
			within := topology.NoNUMA
			if k.bestEffort {
				if z, ok := k.cm.SingleNUMANode(n.free, t*int(cpu)); ok {
					within = z
				}
			}
			h.cpus, _ = k.cm.TakePacked(n.free, t*int(cpu), within)
			h.cpusPerNUMA = k.countPerNUMA(h.cpus)
			placed[ci].CPUs = h.cpusPerNUMA
		}
		holds[ci] = h
	}
	k.held[r.index] = holds
	k.version++
	return attempt{workers: placed}, nil
}

func (k *kube) release(r *run) error {
	for _, h := range k.held[r.index] {
		n := &k.nodes[h.node]
		n.reqMilli -= h.milli
		n.reqMem -= h.mem
		n.free.Release(h.cpus)
	}
	k.held[r.index] = nil
	k.version++
	return nil
}

func (k *kube) view(time.Duration, bool) (uint64, error) { return k.version, nil }

// unfit reports a job with a container larger than a node's allocatable CPU or memory.
func (k *kube) unfit(r *run) string {
	cpu := r.job.Spec.TaskResources.CPU.Value()
	mem := r.job.Spec.TaskResources.Memory.Value()
	sizes := k.containers(r)
	for ci, t := range sizes {
		if milli, m := int64(t)*cpu*1000, int64(t)*mem; milli > k.allocMilli || m > k.mem {
			return fmt.Sprintf("container %d of %d (%d CPUs, %s memory) is larger than any node's allocatable (%d CPUs, %s)",
				ci+1, len(sizes), milli/1000, resource.NewQuantity(m, resource.BinarySI), k.allocMilli/1000, resource.NewQuantity(k.mem, resource.BinarySI))
		}
	}
	return ""
}

func (k *kube) freeCPUs(*run) int {
	free := int64(0)
	for i := range k.nodes {
		free += k.allocMilli - k.nodes[i].reqMilli
	}
	return int(free / 1000)
}

// verify checks that requests stay within allocatable and, under the static CPU manager, that
// the free CPUs per NUMA node are what the held containers leave.
func (k *kube) verify() error {
	for i := range k.nodes {
		n := &k.nodes[i]
		if n.reqMilli < 0 || n.reqMilli > k.allocMilli || n.reqMem < 0 || n.reqMem > k.mem {
			return fmt.Errorf("node %s: requests %dm CPU and %d bytes outside its allocatable %dm and %d", nodeName(i), n.reqMilli, n.reqMem, k.allocMilli, k.mem)
		}
		if !k.static {
			continue
		}
		free := 0
		for z, f := range k.perNUMA(n.free) {
			if f < 0 || f > k.staticSize[z] {
				return fmt.Errorf("node %s: NUMA node %d has %d free CPUs of %d", nodeName(i), z, f, k.staticSize[z])
			}
			free += f
		}
		if want := int((k.allocMilli - n.reqMilli) / 1000); free != want {
			return fmt.Errorf("node %s: static CPU manager has %d free CPUs, requests leave %d", nodeName(i), free, want)
		}
	}
	return nil
}
