package snapshot

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// HostPort is a port a pod holds on its node's network (kube-scheduler's NodePorts filter counts
// the same): a container port with a hostPort, or any container port of a pod on the host's
// network. The host IP is not told apart: two pods asking for one port conflict whatever
// address they bind.
type HostPort struct {
	Protocol corev1.Protocol
	Port     int32
}

func (h HostPort) String() string { return strconv.Itoa(int(h.Port)) + "/" + string(h.Protocol) }

func compareHostPorts(a, b HostPort) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}

// HostPortsOf returns the host ports a pod's containers and init containers declare, sorted,
// without repeats.
func HostPortsOf(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container) {
		for i := range cs {
			for _, p := range cs[i].Ports {
				port := p.HostPort
				if port == 0 && pod.Spec.HostNetwork {
					port = p.ContainerPort
				}
				if port <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, HostPort{Protocol: proto, Port: port})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	slices.SortFunc(out, compareHostPorts)
	return slices.Compact(out)
}

// HostPortInUse reports whether a pod on the node already holds the port.
func (n *Node) HostPortInUse(h HostPort) bool {
	_, found := slices.BinarySearchFunc(n.HostPorts, h, compareHostPorts)
	return found
}

func (n *Node) addHostPorts(ports []HostPort) {
	for _, h := range ports {
		if i, found := slices.BinarySearchFunc(n.HostPorts, h, compareHostPorts); !found {
			n.HostPorts = slices.Insert(n.HostPorts, i, h)
		}
	}
}
