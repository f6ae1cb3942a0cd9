package clusterconf

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// twoNodes is a virtual cluster over a two-socket SMT node and a one-socket VM without topology.
func twoNodes() Cluster {
	return Cluster{
		Name: "alice", Namespace: "hpc",
		ControllerAddr: "10.0.0.2",
		Ports:          v1alpha1.VirtualClusterPorts{Slurmctld: 21000, Slurmd: 21001, SSH: 21002, SrunFirst: 21003, SrunLast: 21015},
		Nodes: []Node{
			{Name: "node-b", Addr: "10.0.0.2", CPUs: 2, RealMemoryMiB: 24105},
			{Name: "node-a", Addr: "10.0.0.1", CPUs: 72, Sockets: 2, CoresPerSocket: 18, ThreadsPerCore: 2, RealMemoryMiB: 257000},
		},
		Partitions: []v1alpha1.SlurmPartition{
			{Name: "short", MaxTime: &metav1.Duration{Duration: 90 * time.Second}, DefaultTime: &metav1.Duration{Duration: time.Minute}, MaxNodes: 1},
			{Name: "big", Nodes: []string{"node-a", "node-z"}, Default: true, MaxCPUsPerNode: 64},
			{Name: "gone", Nodes: []string{"node-z"}},
		},
	}
}

// The whole slurm.conf of twoNodes, reviewed line by line: nodes sorted by name with the
// topology they have, partitions with their limits in Slurm's minutes (rounded up), the named
// node the cluster does not span left out.
func TestSlurmConfGolden(t *testing.T) {
	files, err := Generate(twoNodes())
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/slurm.conf.golden"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(files[layout.SlurmConfKey]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), files[layout.SlurmConfKey]); diff != "" {
		t.Errorf("slurm.conf differs from %s (-want +got; UPDATE_GOLDEN=1 rewrites it):\n%s", golden, diff)
	}
}

func TestGeneratedFiles(t *testing.T) {
	files, err := Generate(twoNodes())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{layout.SlurmConfKey, layout.CgroupConfKey, layout.JobSubmitLuaKey, layout.TaskPrologKey, layout.SSHConfigKey} {
		if files[key] == "" {
			t.Errorf("no %s generated", key)
		}
	}
	if len(files) != 5 {
		t.Errorf("files %v, want the five keys", files)
	}
	if want, _ := slurm.TaskProlog("/run/slurmd.pid", 30*time.Second); files[layout.TaskPrologKey] != want {
		t.Errorf("task_prolog is not slurm.TaskProlog of slurmd's PID file with the default timeout:\n%s", files[layout.TaskPrologKey])
	}
	ssh := files[layout.SSHConfigKey]
	for _, want := range []string{"Host node-a 10.0.0.1\n    Port 21002\n", "Host node-b 10.0.0.2\n    Port 21002\n", "IdentityFile /root/.ssh/id_ed25519\n", "StrictHostKeyChecking no\n"} {
		if !strings.Contains(ssh, want) {
			t.Errorf("ssh_config lacks %q:\n%s", want, ssh)
		}
	}
	if files[layout.JobSubmitLuaKey] != slurm.JobSubmitLua {
		t.Errorf("job_submit.lua is not the delegation bridge's script:\n%s", files[layout.JobSubmitLuaKey])
	}
	// The first partition is the default when none says so.
	c := twoNodes()
	c.Partitions[1].Default = false
	files, err = Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(files[layout.SlurmConfKey], "PartitionName=short Nodes=node-a,node-b Default=YES MaxTime=2 DefaultTime=1 MaxNodes=1 State=UP\n") {
		t.Errorf("the first partition is not the default:\n%s", files[layout.SlurmConfKey])
	}
}

func TestGenerateRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Cluster)
		want string
	}{
		{"node name", func(c *Cluster) { c.Nodes[0].Name = "Node B" }, `node "Node B": its name cannot be a Slurm NodeName`},
		{"node name with brackets", func(c *Cluster) { c.Nodes[0].Name = "n[1-2]" }, `node "n[1-2]"`},
		{"address", func(c *Cluster) { c.Nodes[1].Addr = "10.0.0.1 x" }, `node node-a: address "10.0.0.1 x"`},
		{"controller address", func(c *Cluster) { c.ControllerAddr = "" }, `virtual cluster hpc/alice: address "" of the slurmctld node`},
		{"port", func(c *Cluster) { c.Ports.Slurmd = 0 }, "virtual cluster hpc/alice: port 0 is not a TCP port"},
		{"srun range", func(c *Cluster) { c.Ports.SrunFirst = 30000 }, "srun ports 30000-21015 are an empty range"},
		{"no nodes", func(c *Cluster) { c.Nodes = nil }, "virtual cluster hpc/alice spans no node"},
		{"no memory", func(c *Cluster) { c.Nodes[0].RealMemoryMiB = 0 }, "node node-b reports 2 CPUs and 0 MiB"},
		{"topology", func(c *Cluster) { c.Nodes[1].ThreadsPerCore = 1 }, "node node-a: 2 sockets × 18 cores × 1 threads is not its 72 CPUs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := twoNodes()
			tt.edit(&c)
			if _, err := Generate(c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
