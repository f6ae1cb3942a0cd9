package framework

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Node is one node of the local cluster, as hack/cluster/up.sh recorded it in cluster.env: the
// host itself on a single-node cluster, or one of node-1..node-N, each in network, mount and
// cgroup namespaces of its own (hack/cluster/nodes.sh). Paths are as the host, where the tests
// run, sees them.
type Node struct {
	Name string
	// IP is the node's address: 127.0.0.1 for the host, the node's own address otherwise.
	IP string
	// KubeletURL is the kubelet's HTTPS endpoint; KubeletRoot its --root-dir; KubeletLog its log.
	KubeletURL, KubeletRoot, KubeletLog string
	// ContainerdSock is the node's containerd socket.
	ContainerdSock string
	// CgroupRoot is the kubelet's cgroupRoot without the leading slash: empty on the host,
	// finegrain-nodes/<name> on a node of several, where each node's pods live in a subtree of
	// their own.
	CgroupRoot string
	// PodCIDR is the range the node's pods on the pod network get addresses from; empty where
	// pods use the host's network only.
	PodCIDR string
	// Netns is the node's network namespace (ip netns); empty for the host.
	Netns string
}

// nodesFromEnv reads the NODE_* lists of cluster.env (space-separated, one entry per node). A
// cluster.env without them (written by an older tree) describes the one node of NODE_NAME.
func nodesFromEnv(env map[string]string) ([]Node, error) {
	names := strings.Fields(env["NODE_NAMES"])
	if len(names) == 0 {
		return []Node{{Name: env["NODE_NAME"], IP: "127.0.0.1", KubeletURL: env["KUBELET_URL"], KubeletRoot: env["KUBELET_ROOT"],
			KubeletLog: filepath.Join(env["LOG_DIR"], "kubelet.log"), ContainerdSock: env["CONTAINERD_SOCK"]}}, nil
	}
	list := func(key string, required bool) ([]string, error) {
		v := strings.Fields(env[key])
		if len(v) == 0 && !required {
			return make([]string, len(names)), nil
		}
		if len(v) != len(names) {
			return nil, fmt.Errorf("%s has %d entries for the %d nodes of NODE_NAMES; bring the cluster up again with make cluster-up", key, len(v), len(names))
		}
		return v, nil
	}
	cols := map[string][]string{}
	for key, required := range map[string]bool{"NODE_IPS": true, "NODE_KUBELET_URLS": true, "NODE_KUBELET_ROOTS": true, "NODE_KUBELET_LOGS": true,
		"NODE_CONTAINERD_SOCKS": true, "NODE_CGROUP_ROOTS": true, "NODE_POD_CIDRS": false, "NODE_NETNS": false} {
		v, err := list(key, required)
		if err != nil {
			return nil, err
		}
		cols[key] = v
	}
	nodes := make([]Node, len(names))
	for i, name := range names {
		nodes[i] = Node{
			Name: name, IP: cols["NODE_IPS"][i], KubeletURL: cols["NODE_KUBELET_URLS"][i],
			KubeletRoot: cols["NODE_KUBELET_ROOTS"][i], KubeletLog: cols["NODE_KUBELET_LOGS"][i],
			ContainerdSock: cols["NODE_CONTAINERD_SOCKS"][i], CgroupRoot: strings.Trim(cols["NODE_CGROUP_ROOTS"][i], "/"),
			PodCIDR: cols["NODE_POD_CIDRS"][i], Netns: cols["NODE_NETNS"][i],
		}
	}
	return nodes, nil
}

// Node returns the node of that name.
func (c *Cluster) Node(name string) (Node, error) {
	i := slices.IndexFunc(c.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, fmt.Errorf("node %q is not one of the cluster's nodes %v", name, c.NodeNames())
	}
	return c.Nodes[i], nil
}

// NodeNames lists the cluster's nodes in order.
func (c *Cluster) NodeNames() []string {
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	return names
}

// RequireNodes skips the test unless the cluster has at least n nodes (make e2e runs the
// multi-node suite on NODES=3).
func (c *Cluster) RequireNodes(t testing.TB, n int) {
	t.Helper()
	if len(c.Nodes) < n {
		t.Skipf("needs a cluster of %d nodes; this one has %d (make cluster-up NODES=%d, or make e2e, which runs the multi-node pass)", n, len(c.Nodes), n)
	}
}

// CgroupDir returns the directory of a container's cgroup for one controller on whichever node
// the pod is bound to (ContainerCgroupUnder with that node's cgroup root).
func (c *Cluster) CgroupDir(pod *corev1.Pod, container, controller string) (string, error) {
	node, err := c.Node(pod.Spec.NodeName)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return ContainerCgroupUnder(CgroupRoot, node.CgroupRoot, pod, container, controller)
}
