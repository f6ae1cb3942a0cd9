//go:build e2e

// Helpers of the multi-node suite (multinode_test.go): finegrain deployed on every node of a
// cluster brought up with NODES=3, HPCJobs whose pods use the pod network, each node's pins as its
// own agent publishes them, and the ranks of an MPI job checked against their worker's pin on
// whichever node it runs.
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// multiNodes is how many nodes the suite needs: a gang over three nodes.
const multiNodes = 3

// deployNodes deploys finegrain with the cluster's overlay and waits until the placer is
// available and the agent of every node runs and offers an exclusive CPU in its free-core map.
func deployNodes(t *testing.T) *framework.Cluster {
	t.Helper()
	c := framework.Setup(t)
	c.RequireNodes(t, multiNodes)
	c.RequireCPUManagerPolicy(t, "none")
	c.ApplyKustomize(t, c.Overlay)
	framework.Eventually(t, "the HPCJob CRD to serve objects", placerTimeout, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
		return err
	})
	framework.Eventually(t, "the node agent ready on every node and the placer available", placerTimeout, func(ctx context.Context) error {
		ds, err := c.Client.AppsV1().DaemonSets(framework.SystemNamespace).Get(ctx, "finegrain-nodeagent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(ds.Status.NumberReady) != len(c.Nodes) || ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled {
			return fmt.Errorf("agents ready on %d of %d nodes, %d of %d updated", ds.Status.NumberReady, len(c.Nodes), ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled)
		}
		d, err := c.Client.AppsV1().Deployments(framework.SystemNamespace).Get(ctx, "finegrain-placer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("placer: %d of %d replicas available", d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
	framework.Eventually(t, "an exclusive CPU free on every node", placerTimeout, func(ctx context.Context) error {
		for _, n := range c.Nodes {
			obj, err := nodeTopology(ctx, c, n.Name)
			if err != nil {
				return err
			}
			if v, _ := nrt.AttributeValue(obj.Attributes, nrt.AttrExclusiveAvailable); v == "" || v == "0" {
				return fmt.Errorf("node %s: %s=%q", n.Name, nrt.AttrExclusiveAvailable, v)
			}
		}
		return nil
	})
	return c
}

func nodeTopology(ctx context.Context, c *framework.Cluster, node string) (*nrt.NodeResourceTopology, error) {
	u, err := c.Dynamic.Resource(nrt.GroupVersionResource).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("free-core map of node %s: %w", node, err)
	}
	return nrt.FromUnstructured(u)
}

// nodePins is every pin the agent of node published, with the NUMA node it is in.
func nodePins(ctx context.Context, c *framework.Cluster, node string) (map[string]nodePin, error) {
	obj, err := nodeTopology(ctx, c, node)
	if err != nil {
		return nil, err
	}
	out := map[string]nodePin{}
	for _, z := range obj.Zones {
		v, _ := nrt.AttributeValue(z.Attributes, nrt.AttrPins)
		pins, err := nrt.ParsePins(v)
		if err != nil {
			return nil, fmt.Errorf("pins of node %s zone %s: %w", node, z.Name, err)
		}
		numa, err := strconv.Atoi(strings.TrimPrefix(z.Name, nrt.ZonePrefix))
		if err != nil {
			return nil, fmt.Errorf("node %s: zone %q is not %s<NUMA node>", node, z.Name, nrt.ZonePrefix)
		}
		for _, p := range pins {
			out[p.Namespace+"/"+p.Pod+"/"+p.Container] = nodePin{cpus: p.CPUs, numa: numa}
		}
	}
	return out, nil
}

type nodePin struct {
	cpus cpuset.CPUSet
	numa int
}

// pinOf waits until the agent of the pod's node pins container and the kernel holds that pin in
// the container's cpuset cgroup, and returns it.
func pinOf(t *testing.T, c *framework.Cluster, pod *corev1.Pod, container string) nodePin {
	t.Helper()
	var pin nodePin
	framework.Eventually(t, "the agent of node "+pod.Spec.NodeName+" to pin "+pod.Name, time.Minute, func(ctx context.Context) error {
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pins, err := nodePins(ctx, c, p.Spec.NodeName)
		if err != nil {
			return err
		}
		var ok bool
		if pin, ok = pins[p.Namespace+"/"+p.Name+"/"+container]; !ok {
			return fmt.Errorf("node %s publishes no pin of %s/%s yet", p.Spec.NodeName, p.Name, container)
		}
		dir, err := c.CgroupDir(p, container, "cpuset")
		if err != nil {
			return err
		}
		cpus, err := framework.ReadCgroupFile(dir, "cpuset.cpus")
		if err != nil {
			return err
		}
		if got, err := cpuset.Parse(cpus); err != nil || !got.Equals(pin.cpus) {
			return fmt.Errorf("%s/cpuset.cpus is %q, the agent's pin %s", dir, cpus, pin.cpus)
		}
		return nil
	})
	return pin
}

// noPinsOn waits until no node's agent holds a pin of the namespace.
func noPinsOn(t *testing.T, c *framework.Cluster, ns string, nodes ...string) {
	t.Helper()
	framework.Eventually(t, "every CPU pinned for "+ns+" back in its node's shared pool", time.Minute, func(ctx context.Context) error {
		for _, n := range nodes {
			pins, err := nodePins(ctx, c, n)
			if err != nil {
				return err
			}
			for key, p := range pins {
				if strings.HasPrefix(key, ns+"/") {
					return fmt.Errorf("node %s still pins %s to CPUs %s", n, key, p.cpus)
				}
			}
		}
		return nil
	})
}

// podNetworkJob is an HPCJob of tasks one-CPU tasks, profile cpu and granularity scale: as many
// workers and task groups as there are tasks, one per node while nodes last. Its pods use the pod
// network and idle (the worker image runs no sshd, so its workers never become Ready and the
// launcher comes with them, AtStartup).
func podNetworkJob(name string, tasks int) *v1alpha1.HPCJob {
	job := testJob(name, tasks)
	job.Spec.Profile, job.Spec.Granularity = v1alpha1.ProfileCPU, v1alpha1.GranularityScale
	job.Spec.Launcher.Spec.HostNetwork = false
	job.Spec.Worker.Spec.HostNetwork = false
	return job
}

// podNetworkMPIJob is mpiJob (the MPI image, a one-task worker per task) with its pods on the
// pod network: each worker's sshd on port 22 of its own address.
func podNetworkMPIJob(name string, tasks int, command string) *v1alpha1.HPCJob {
	job := mpiJob(name, v1alpha1.OpenMPI, tasks, command)
	job.Spec.Profile, job.Spec.Granularity = v1alpha1.ProfileCPU, v1alpha1.GranularityScale
	job.Spec.Launcher.Spec.HostNetwork = false
	job.Spec.Worker.Spec.HostNetwork = false
	return job
}

// createHPCCInput creates the hpccinf ConfigMap mpiJob's workers mount, sized for tasks ranks.
func createHPCCInput(t *testing.T, c *framework.Cluster, ns, job string, tasks int) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: job + "-hpccinf"},
		Data: map[string]string{"hpccinf.txt": hpccInput(t, tasks)}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// workerPods returns the bound worker pods of a running job, by worker name, and checks that
// each is on the node its placement names, with an address of that node's pod range.
func workerPods(t *testing.T, c *framework.Cluster, ns string, job *v1alpha1.HPCJob) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for _, pl := range job.Status.Placements {
		pod := c.WaitForPod(t, ns, pl.Worker, "running", framework.PodStartTimeout, framework.Running)
		if pod.Spec.NodeName != pl.Node {
			t.Errorf("worker %s runs on node %s, its placement says %s", pl.Worker, pod.Spec.NodeName, pl.Node)
		}
		node, err := c.Node(pod.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		if node.PodCIDR != "" {
			prefix, err1 := netip.ParsePrefix(node.PodCIDR)
			addr, err2 := netip.ParseAddr(pod.Status.PodIP)
			if err1 != nil || err2 != nil || !prefix.Contains(addr) {
				t.Errorf("worker %s has address %q, not one of node %s's pod range %s", pl.Worker, pod.Status.PodIP, node.Name, node.PodCIDR)
			}
		}
		out[pl.Worker] = pod
	}
	return out
}

// fillerPod is a plain pod bound straight to node that requests cpu of the shared pool: load
// for the placement policies to weigh.
func fillerPod(name, node, cpu string) *corev1.Pod {
	ctr := framework.Container("load", framework.WorkerImage)
	ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	pod := framework.Pod(name, ctr)
	pod.Spec.NodeName = node
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return pod
}

// createPod creates a pod as it is (CreatePod would put it on the host's network) and dumps it
// should the test fail.
func createPod(t *testing.T, c *framework.Cluster, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
	c.DumpOnFailure(t, ns, pod.Name)
}

// cpuLoads is each node's requested CPU as a fraction of its allocatable CPU, counting the pods
// bound to it that have not ended: what the placement policies weigh.
func cpuLoads(ctx context.Context, c *framework.Cluster) (map[string]float64, error) {
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	requested := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		requested[p.Spec.NodeName] += podCPU(&p)
	}
	loads := map[string]float64{}
	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		loads[n.Name] = float64(requested[n.Name]) / float64(node.Status.Allocatable.Cpu().MilliValue())
	}
	return loads, nil
}

// podCPU is a pod's CPU request in millicores as the scheduler counts it: its containers', or its
// largest init container's when that is more, plus the pod's overhead.
func podCPU(p *corev1.Pod) int64 {
	var sum, init int64
	for _, ctr := range p.Spec.Containers {
		sum += ctr.Resources.Requests.Cpu().MilliValue()
	}
	for _, ctr := range p.Spec.InitContainers {
		init = max(init, ctr.Resources.Requests.Cpu().MilliValue())
	}
	return max(sum, init) + p.Spec.Overhead.Cpu().MilliValue()
}
