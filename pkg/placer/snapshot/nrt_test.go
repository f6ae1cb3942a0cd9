package snapshot

import (
	"bytes"
	"testing"
)

// FuzzReadObjects feeds arbitrary cluster snapshot files through reading and building: no input
// may panic or hang, and every node either has zones or says why it cannot take pinned workers.
func FuzzReadObjects(f *testing.F) {
	f.Add([]byte(`apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "8", memory: 8Gi, pods: "10"}}}
- apiVersion: topology.node.k8s.io/v1alpha2
  kind: NodeResourceTopology
  metadata: {name: n1}
  attributes: [{name: finegrain.dev/generation, value: "2"}, {name: finegrain.dev/exclusive-available, value: "2"}, {name: finegrain.dev/min-shared-cpus, value: "1"}]
  zones:
  - name: node-0
    type: Node
    resources: [{name: cpu, available: "3"}, {name: memory, allocatable: 4Gi, available: 4Gi}]
    attributes: [{name: finegrain.dev/free-cpus, value: "1-3"}, {name: finegrain.dev/pins, value: "a/p/c=0"}]
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: a, labels: {finegrain.dev/pinning: exclusive}, annotations: {finegrain.dev/numa-node: "0"}}
  spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
`))
	f.Add([]byte("kind: NodeResourceTopology\nmetadata: {name: n1}\nzones: [{name: node-0, type: Node, attributes: [{name: finegrain.dev/free-cpus, value: '0-3'}]}]"))
	f.Add([]byte("kind: NodeResourceTopology\nmetadata: {name: n1}\nzones: [{name: node-x, type: Node, resources: [{name: cpu, available: 1e400}]}]"))
	f.Add([]byte("items: 3\nkind: List"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, _, err := ReadObjects(bytes.NewReader(data), "fuzz.yaml")
		if err != nil {
			return
		}
		s := Build(in)
		for i := range s.Nodes {
			if len(s.ZonesOf(i)) == 0 && s.Nodes[i].TopologyProblem == "" {
				t.Fatalf("node %q has no zones and no topology problem", s.Nodes[i].Name)
			}
			if s.Nodes[i].ExclusiveAvailable < 0 || s.Capacity().Nodes[i].ExclusiveAvailable < 0 {
				t.Fatalf("node %q has %d CPUs for pinned pods (%d when idle)", s.Nodes[i].Name, s.Nodes[i].ExclusiveAvailable, s.Capacity().Nodes[i].ExclusiveAvailable)
			}
			for _, z := range s.ZonesOf(i) {
				if z.FreeCPUs < 0 {
					t.Fatalf("node %q NUMA %d has %d free CPUs", s.Nodes[i].Name, z.NUMA, z.FreeCPUs)
				}
			}
		}
	})
}
