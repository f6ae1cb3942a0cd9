package framework

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodesFromEnv(t *testing.T) {
	single := map[string]string{
		"NODE_NAME": "vm", "KUBELET_URL": "https://127.0.0.1:10250", "KUBELET_ROOT": "/c/kubelet",
		"CONTAINERD_SOCK": "/r/containerd/containerd.sock", "LOG_DIR": "/c/logs",
	}
	want := []Node{{Name: "vm", IP: "127.0.0.1", KubeletURL: "https://127.0.0.1:10250", KubeletRoot: "/c/kubelet",
		KubeletLog: "/c/logs/kubelet.log", ContainerdSock: "/r/containerd/containerd.sock"}}
	// A cluster.env of an older tree, without the NODE_* lists, and one of this tree.
	for _, env := range []map[string]string{single, with(single, map[string]string{
		"NODE_NAMES": "vm", "NODE_IPS": "127.0.0.1", "NODE_KUBELET_URLS": "https://127.0.0.1:10250", "NODE_KUBELET_ROOTS": "/c/kubelet",
		"NODE_KUBELET_LOGS": "/c/logs/kubelet.log", "NODE_CONTAINERD_SOCKS": "/r/containerd/containerd.sock", "NODE_CGROUP_ROOTS": "/",
	})} {
		got, err := nodesFromEnv(env)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("nodesFromEnv (-want +got):\n%s", diff)
		}
	}

	several := map[string]string{
		"NODE_NAMES": "node-1 node-2", "NODE_IPS": "198.19.0.11 198.19.0.12",
		"NODE_KUBELET_URLS":     "https://198.19.0.11:10250 https://198.19.0.12:10250",
		"NODE_KUBELET_ROOTS":    "/c/nodes/node-1/kubelet /c/nodes/node-2/kubelet",
		"NODE_KUBELET_LOGS":     "/c/logs/kubelet-node-1.log /c/logs/kubelet-node-2.log",
		"NODE_CONTAINERD_SOCKS": "/r/nodes/node-1/containerd/containerd.sock /r/nodes/node-2/containerd/containerd.sock",
		"NODE_CGROUP_ROOTS":     "/finegrain-nodes/node-1 /finegrain-nodes/node-2",
		"NODE_POD_CIDRS":        "198.18.1.0/24 198.18.2.0/24", "NODE_NETNS": "finegrain-node-1 finegrain-node-2",
	}
	got, err := nodesFromEnv(several)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Node{Name: "node-2", IP: "198.19.0.12", KubeletURL: "https://198.19.0.12:10250",
		KubeletRoot: "/c/nodes/node-2/kubelet", KubeletLog: "/c/logs/kubelet-node-2.log",
		ContainerdSock: "/r/nodes/node-2/containerd/containerd.sock", CgroupRoot: "finegrain-nodes/node-2",
		PodCIDR: "198.18.2.0/24", Netns: "finegrain-node-2"}, got[1]); len(got) != 2 || diff != "" {
		t.Errorf("nodesFromEnv: %d nodes, second (-want +got):\n%s", len(got), diff)
	}
	if _, err := nodesFromEnv(with(several, map[string]string{"NODE_IPS": "198.19.0.11"})); err == nil || !strings.Contains(err.Error(), "NODE_IPS has 1 entries for the 2 nodes") {
		t.Errorf("a short NODE_IPS: %v", err)
	}
}

func with(env, more map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}
