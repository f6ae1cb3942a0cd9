package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/report"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

func newAgent(t *testing.T) (*Agent, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewAgent(reg, Labels{Paths: []string{"inotify", "scan"}, ErrorReasons: []string{"allocate", "cgroup-write"}})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestAgentCountersStartAtZeroForKnownLabels(t *testing.T) {
	_, reg := newAgent(t)
	const want = `
# HELP finegrain_nodeagent_errors_total Failures by reason; the agent's log says what failed.
# TYPE finegrain_nodeagent_errors_total counter
finegrain_nodeagent_errors_total{reason="allocate"} 0
finegrain_nodeagent_errors_total{reason="cgroup-write"} 0
# HELP finegrain_nodeagent_pins_total Exclusive pins written to a container's cgroup for the first time, by how the agent learnt of the container.
# TYPE finegrain_nodeagent_pins_total counter
finegrain_nodeagent_pins_total{path="inotify"} 0
finegrain_nodeagent_pins_total{path="scan"} 0
# HELP finegrain_nodeagent_checkpoint_writes_total Checkpoint file writes, by result.
# TYPE finegrain_nodeagent_checkpoint_writes_total counter
finegrain_nodeagent_checkpoint_writes_total{result="failure"} 0
finegrain_nodeagent_checkpoint_writes_total{result="success"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "finegrain_nodeagent_errors_total", "finegrain_nodeagent_pins_total", "finegrain_nodeagent_checkpoint_writes_total"); err != nil {
		t.Error(err)
	}
}

func TestAgentRecordsHooks(t *testing.T) {
	m, reg := newAgent(t)
	m.PinWritten("inotify", 300*time.Microsecond)
	m.PinWritten("inotify", 2*time.Millisecond)
	m.PinWritten("scan", 3*time.Second)
	m.Allocated()
	m.Allocated()
	m.Released()
	m.DriftRepaired()
	m.StartupRepaired("CgroupDisagrees")
	m.Failed("cgroup-write")
	m.Failed("cri-resolve")
	m.CheckpointWritten(4*time.Millisecond, nil)
	m.CheckpointWritten(time.Second, errors.New("disk full"))
	m.Published(42, 30*time.Millisecond)
	m.PublishFailed()
	m.SlurmProcessesConfined(3)
	m.SlurmProcessesConfined(1)

	const want = `
# HELP finegrain_nodeagent_allocations_total Exclusive CPU assignments made to containers.
# TYPE finegrain_nodeagent_allocations_total counter
finegrain_nodeagent_allocations_total 2
# HELP finegrain_nodeagent_releases_total Exclusive CPU assignments returned to the shared pool.
# TYPE finegrain_nodeagent_releases_total counter
finegrain_nodeagent_releases_total 1
# HELP finegrain_nodeagent_repairs_total Container cgroups rewritten because they no longer held what the agent wrote.
# TYPE finegrain_nodeagent_repairs_total counter
finegrain_nodeagent_repairs_total 1
# HELP finegrain_nodeagent_startup_repairs_total Conflicts the start-up rebuild resolved between checkpoint, cgroups and API server, by reason.
# TYPE finegrain_nodeagent_startup_repairs_total counter
finegrain_nodeagent_startup_repairs_total{reason="CgroupDisagrees"} 1
# HELP finegrain_nodeagent_errors_total Failures by reason; the agent's log says what failed.
# TYPE finegrain_nodeagent_errors_total counter
finegrain_nodeagent_errors_total{reason="allocate"} 0
finegrain_nodeagent_errors_total{reason="cgroup-write"} 1
finegrain_nodeagent_errors_total{reason="cri-resolve"} 1
# HELP finegrain_nodeagent_pins_total Exclusive pins written to a container's cgroup for the first time, by how the agent learnt of the container.
# TYPE finegrain_nodeagent_pins_total counter
finegrain_nodeagent_pins_total{path="inotify"} 2
finegrain_nodeagent_pins_total{path="scan"} 1
# HELP finegrain_nodeagent_checkpoint_writes_total Checkpoint file writes, by result.
# TYPE finegrain_nodeagent_checkpoint_writes_total counter
finegrain_nodeagent_checkpoint_writes_total{result="failure"} 1
finegrain_nodeagent_checkpoint_writes_total{result="success"} 1
# HELP finegrain_nodeagent_nrt_publishes_total NodeResourceTopology applies, by result.
# TYPE finegrain_nodeagent_nrt_publishes_total counter
finegrain_nodeagent_nrt_publishes_total{result="failure"} 1
finegrain_nodeagent_nrt_publishes_total{result="success"} 1
# HELP finegrain_nodeagent_nrt_published_generation State generation of the last NodeResourceTopology the API server accepted.
# TYPE finegrain_nodeagent_nrt_published_generation gauge
finegrain_nodeagent_nrt_published_generation 42
# HELP finegrain_nodeagent_slurm_processes_confined_total Processes of Slurm jobs moved from a virtual cluster's slurmd container into their job's placeholder container.
# TYPE finegrain_nodeagent_slurm_processes_confined_total counter
finegrain_nodeagent_slurm_processes_confined_total 4
`
	names := []string{"finegrain_nodeagent_allocations_total", "finegrain_nodeagent_releases_total", "finegrain_nodeagent_repairs_total",
		"finegrain_nodeagent_startup_repairs_total", "finegrain_nodeagent_errors_total", "finegrain_nodeagent_pins_total", "finegrain_nodeagent_checkpoint_writes_total",
		"finegrain_nodeagent_nrt_publishes_total", "finegrain_nodeagent_nrt_published_generation", "finegrain_nodeagent_slurm_processes_confined_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The unpinned window: 300 µs and 2 ms by inotify, 3 s by scan.
	const wantWindow = `
# HELP finegrain_nodeagent_unpinned_window_seconds Time from noticing a pinned container's cgroup to the end of writing its exclusive cpuset, by path.
# TYPE finegrain_nodeagent_unpinned_window_seconds histogram
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.0001"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.00025"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.0005"} 1
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.001"} 1
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.0025"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.005"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.01"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.025"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.05"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.1"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.25"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="0.5"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="1"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="2.5"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="5"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="10"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="inotify",le="+Inf"} 2
finegrain_nodeagent_unpinned_window_seconds_sum{path="inotify"} 0.0023
finegrain_nodeagent_unpinned_window_seconds_count{path="inotify"} 2
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.0001"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.00025"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.0005"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.001"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.0025"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.005"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.01"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.025"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.05"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.1"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.25"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="0.5"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="1"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="2.5"} 0
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="5"} 1
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="10"} 1
finegrain_nodeagent_unpinned_window_seconds_bucket{path="scan",le="+Inf"} 1
finegrain_nodeagent_unpinned_window_seconds_sum{path="scan"} 3
finegrain_nodeagent_unpinned_window_seconds_count{path="scan"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantWindow), "finegrain_nodeagent_unpinned_window_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.checkpointDuration); n != 1 {
		t.Errorf("checkpoint duration histogram has %d series, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func TestNewAgentRefusesDoubleRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewAgent(reg, Labels{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewAgent(reg, Labels{}); err == nil || !strings.Contains(err.Error(), "register node agent metrics") {
		t.Errorf("second NewAgent on one registry = %v, want a registration error", err)
	}
}

type staticSource struct{ snap report.Snapshot }

func (s staticSource) Snapshot() report.Snapshot { return s.snap }
func (staticSource) Changed() <-chan struct{}    { return nil }

func TestStateReadsSnapshotWhenScraped(t *testing.T) {
	// 2 sockets × 4 cores × 2 threads; core i holds CPUs i and i+8; NUMA node 0 CPUs 0-3,8-11.
	topo, err := topology.Synthetic(topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, err := policy.New(topo, policy.Config{ReservedCPUs: cpuset.New(0, 8), MinSharedCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []policy.Request{
		{Key: policy.Key{PodUID: "u1", Container: "c"}, CPUs: 2},
		{Key: policy.Key{PodUID: "u2", Container: "c"}, CPUs: 4, NUMANode: policy.OnNUMANode(1)},
		{Key: policy.Key{PodUID: "u3", Container: "c"}, CPUs: 1, NUMANode: policy.OnNUMANode(1), AllowSplitCores: true},
	} {
		if _, err := a.Allocate(r); err != nil {
			t.Fatal(err)
		}
	}
	// Node 0: CPUs 1,9 held, free 2-3,10-11 (2 whole cores). Node 1: 4-5,12-13 and one thread
	// of core 6 held, free 3 CPUs with 1 whole core. 7 shared CPUs, 2 must stay shared.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewState(staticSource{report.SnapshotOf(a, 9, nil)}, report.Options{WholeCores: true}))
	const want = `
# HELP finegrain_nodeagent_available_cpus CPUs one exclusive request could get on the NUMA node now, as the NodeResourceTopology publishes it.
# TYPE finegrain_nodeagent_available_cpus gauge
finegrain_nodeagent_available_cpus{numa_node="0"} 4
finegrain_nodeagent_available_cpus{numa_node="1"} 2
# HELP finegrain_nodeagent_exclusive_cpus CPUs of the NUMA node held exclusively by containers.
# TYPE finegrain_nodeagent_exclusive_cpus gauge
finegrain_nodeagent_exclusive_cpus{numa_node="0"} 2
finegrain_nodeagent_exclusive_cpus{numa_node="1"} 5
# HELP finegrain_nodeagent_free_cores Physical cores of the NUMA node whose every hardware thread is free.
# TYPE finegrain_nodeagent_free_cores gauge
finegrain_nodeagent_free_cores{numa_node="0"} 2
finegrain_nodeagent_free_cores{numa_node="1"} 1
# HELP finegrain_nodeagent_free_cpus CPUs of the NUMA node in the shared pool, which exclusive requests can take.
# TYPE finegrain_nodeagent_free_cpus gauge
finegrain_nodeagent_free_cpus{numa_node="0"} 4
finegrain_nodeagent_free_cpus{numa_node="1"} 3
# HELP finegrain_nodeagent_pinned_containers Containers holding exclusive CPUs.
# TYPE finegrain_nodeagent_pinned_containers gauge
finegrain_nodeagent_pinned_containers 3
# HELP finegrain_nodeagent_reserved_cpus CPUs reserved for the kubelet and system daemons.
# TYPE finegrain_nodeagent_reserved_cpus gauge
finegrain_nodeagent_reserved_cpus 2
# HELP finegrain_nodeagent_shared_pool_cpus CPUs in the shared pool (neither reserved nor held exclusively).
# TYPE finegrain_nodeagent_shared_pool_cpus gauge
finegrain_nodeagent_shared_pool_cpus 7
# HELP finegrain_nodeagent_state_generation The agent's state generation; it grows with every change.
# TYPE finegrain_nodeagent_state_generation gauge
finegrain_nodeagent_state_generation 9
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
