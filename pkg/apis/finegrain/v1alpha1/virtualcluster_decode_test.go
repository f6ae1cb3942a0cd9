package v1alpha1

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const goodVirtualCluster = `apiVersion: finegrain.dev/v1alpha1
kind: VirtualCluster
metadata:
  name: alice
  namespace: hpc
spec:
  nodeSelector: {finegrain.dev/pool: hpc}
  partitions:
    - name: short
      default: true
      maxTime: 1h
      defaultTime: 10m
      maxNodes: 2
    - name: long
      nodes: [node-a, node-b]
      maxCPUsPerNode: 8
  sharedVolume: {claimName: alice-home, mountPath: /shared/alice}
`

func TestDecodeVirtualCluster(t *testing.T) {
	vc, err := DecodeVirtualCluster([]byte(goodVirtualCluster), "vc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if vc.Spec.Image != DefaultSlurmImage {
		t.Errorf("image = %q, want the default %q", vc.Spec.Image, DefaultSlurmImage)
	}
	p := vc.Spec.Partitions
	if len(p) != 2 || p[0].MaxTime.Duration != time.Hour || p[0].DefaultTime.Duration != 10*time.Minute || p[0].MaxNodes != 2 ||
		!p[0].Default || p[1].Default || strings.Join(p[1].Nodes, ",") != "node-a,node-b" || p[1].MaxCPUsPerNode != 8 {
		t.Errorf("partitions = %+v", p)
	}
	if sv := vc.Spec.SharedVolume; sv == nil || *sv != (SharedVolume{ClaimName: "alice-home", MountPath: "/shared/alice"}) {
		t.Errorf("sharedVolume = %+v", sv)
	}
}

func TestSharedVolumeDefaultMountPath(t *testing.T) {
	vc, err := DecodeVirtualCluster([]byte(strings.Replace(goodVirtualCluster, ", mountPath: /shared/alice", "", 1)), "vc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sv := vc.Spec.SharedVolume; sv == nil || sv.MountPath != DefaultSharedMountPath {
		t.Errorf("sharedVolume = %+v, want mountPath %s", sv, DefaultSharedMountPath)
	}
}

func TestVirtualClusterDefaults(t *testing.T) {
	vc, err := DecodeVirtualCluster([]byte("apiVersion: finegrain.dev/v1alpha1\nkind: VirtualCluster\nmetadata: {name: bob}\nspec: {}\n"), "vc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if vc.Namespace != "default" || vc.Spec.Image != DefaultSlurmImage || len(vc.Spec.NodeSelector) != 0 {
		t.Errorf("defaults: %+v", vc)
	}
	if p := vc.Spec.Partitions; len(p) != 1 || p[0].Name != DefaultPartitionName || !p[0].Default || p[0].Nodes != nil {
		t.Errorf("default partitions = %+v, want one default %s over every node", p, DefaultPartitionName)
	}
	again := vc.Spec
	SetVirtualClusterDefaults(&again)
	if len(again.Partitions) != 1 || again.Image != vc.Spec.Image {
		t.Errorf("defaulting twice changed the spec: %+v", again)
	}
}

func TestVirtualClusterValidationNamesEachField(t *testing.T) {
	for _, tt := range []struct {
		name, from, to, want string
	}{
		{"long name", "name: alice", "name: " + strings.Repeat("a", 41), "metadata.name: Too long"},
		{"name not a label", "name: alice", "name: alice.b", "metadata.name: Invalid value"},
		{"bad selector", "finegrain.dev/pool: hpc", "'bad key!': hpc", "spec.nodeSelector"},
		{"partition name", "name: short", "name: 'a b'", "spec.partitions[0].name: Invalid value"},
		{"duplicate partition", "name: long", "name: short", "spec.partitions[1].name: Duplicate value"},
		{"two defaults", "maxCPUsPerNode: 8", "maxCPUsPerNode: 8\n      default: true", "spec.partitions[1].default: Invalid value: true: only one partition"},
		{"node name", "node-a, node-b", "node-a, Node_B", "spec.partitions[1].nodes[1]: Invalid value"},
		{"duplicate node", "node-a, node-b", "node-a, node-a", "spec.partitions[1].nodes[1]: Duplicate value"},
		{"max time", "maxTime: 1h", "maxTime: -1h", "spec.partitions[0].maxTime: Invalid value: \"-1h0m0s\": must be positive"},
		{"default time over max", "defaultTime: 10m", "defaultTime: 2h", "spec.partitions[0].defaultTime: Invalid value: \"2h0m0s\": must not exceed maxTime (1h0m0s)"},
		{"max nodes", "maxNodes: 2", "maxNodes: -1", "spec.partitions[0].maxNodes: Invalid value: -1"},
		{"max cpus", "maxCPUsPerNode: 8", "maxCPUsPerNode: -8", "spec.partitions[1].maxCPUsPerNode: Invalid value: -8"},
		{"no claim", "claimName: alice-home", "claimName: ''", "spec.sharedVolume.claimName: Required value: name a ReadWriteMany PersistentVolumeClaim"},
		{"claim name", "claimName: alice-home", "claimName: Alice_Home", `spec.sharedVolume.claimName: Invalid value: "Alice_Home"`},
		{"relative mount path", "/shared/alice", "shared", `spec.sharedVolume.mountPath: Invalid value: "shared": must be an absolute path`},
		{"unclean mount path", "/shared/alice", "/shared/../etc", "must be an absolute path of letters, digits, '.', '_' and '-' without '.' or '..' elements"},
		{"trailing slash", "/shared/alice", "/shared/", "must be an absolute path"},
		{"root", "/shared/alice", "/", `spec.sharedVolume.mountPath: Invalid value: "/": must be an absolute path`},
		{"colon", "/shared/alice", "'/a:b'", `Invalid value: "/a:b": must be an absolute path`},
		{"system directory", "/shared/alice", "/usr", `spec.sharedVolume.mountPath: Invalid value: "/usr": is a system directory of the image`},
		{"below a system directory", "/shared/alice", "/etc/slurm", `Invalid value: "/etc/slurm": is a system directory`},
		{"holds the ssh directory", "/shared/alice", "/root", `spec.sharedVolume.mountPath: Invalid value: "/root": holds or is inside one of the pods' own mounts (/root/.ssh, /var/spool/slurm)`},
		{"inside the spool", "/shared/alice", "/var/spool/slurm/d", `Invalid value: "/var/spool/slurm/d": holds or is inside`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeVirtualCluster([]byte(strings.Replace(goodVirtualCluster, tt.from, tt.to, 1)), "vc.yaml")
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v, want an *InvalidError", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "VirtualCluster hpc/") {
				t.Errorf("err = %v, want it to name the object and contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeVirtualClusterStrict(t *testing.T) {
	for _, tt := range []struct{ name, data, want string }{
		{"unknown field", strings.Replace(goodVirtualCluster, "maxNodes: 2", "maxNode: 2", 1), `unknown field "spec.partitions[0].maxNode"`},
		{"wrong kind", strings.Replace(goodVirtualCluster, "kind: VirtualCluster", "kind: HPCJob", 1), `want apiVersion "finegrain.dev/v1alpha1" kind "VirtualCluster"`},
		{"bad duration", strings.Replace(goodVirtualCluster, "maxTime: 1h", "maxTime: an hour", 1), `invalid duration "an hour"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeVirtualCluster([]byte(tt.data), "vc.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestVirtualClusterStatusDeepCopy(t *testing.T) {
	s := VirtualClusterStatus{Ports: &VirtualClusterPorts{Slurmctld: 1}, Nodes: []VirtualClusterNode{{Name: "a"}}, Jobs: []SlurmJob{{ID: 1}}}
	c := s.DeepCopy()
	c.Ports.Slurmctld, c.Nodes[0].Name, c.Jobs[0].ID = 2, "b", 2
	if s.Ports.Slurmctld != 1 || s.Nodes[0].Name != "a" || s.Jobs[0].ID != 1 {
		t.Errorf("the copy shares memory with the original: %+v", s)
	}
}

func FuzzDecodeVirtualCluster(f *testing.F) {
	f.Add([]byte(goodVirtualCluster))
	f.Fuzz(func(t *testing.T, data []byte) {
		vc, err := DecodeVirtualCluster(data, "fuzz")
		var inv *InvalidError
		if err == nil || errors.As(err, &inv) {
			// Defaulting is idempotent on everything decoded.
			again := vc.Spec
			if sv := vc.Spec.SharedVolume; sv != nil {
				again.SharedVolume = &SharedVolume{ClaimName: sv.ClaimName, MountPath: sv.MountPath}
			}
			SetVirtualClusterDefaults(&again)
			if len(again.Partitions) != len(vc.Spec.Partitions) || again.Image != vc.Spec.Image ||
				(vc.Spec.SharedVolume != nil && again.SharedVolume.MountPath != vc.Spec.SharedVolume.MountPath) {
				t.Errorf("defaulting twice changed %+v", vc.Spec)
			}
		}
	})
}

// make demo-slurm's VirtualCluster (after its Namespace in the same file) decodes strictly and is
// valid as the demo applies it.
func TestDemoVirtualClusterDecodes(t *testing.T) {
	data, err := os.ReadFile("../../../../hack/cluster/demo/virtualcluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	vc, err := DecodeVirtualCluster([]byte(docs[len(docs)-1]), "virtualcluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if vc.Namespace != "finegrain-demo-slurm" || vc.Name != "demo" || len(vc.Spec.Partitions) != 1 || !vc.Spec.Partitions[0].Default {
		t.Errorf("demo VirtualCluster %s/%s, partitions %+v: want finegrain-demo-slurm/demo with one default partition", vc.Namespace, vc.Name, vc.Spec.Partitions)
	}
}
