package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/report"
)

// fakeLister answers like an agent with one MPI worker pinned on CPUs 2-5 of NUMA node 0 and
// one whose cgroup vanished; it records the pods asked for.
type fakeLister struct{ asked [][]types.NamespacedName }

func (f *fakeLister) Processes(pods []types.NamespacedName) ([]agent.PinnedProcesses, error) {
	f.asked = append(f.asked, pods)
	id := cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("a", 64)}
	cpus, mems := cpuset.New(2, 3, 4, 5), cpuset.New(0)
	return []agent.PinnedProcesses{
		{
			Pin:       report.Pin{PodUID: "u0", Namespace: "hpc", Pod: "lammps-worker-0", Container: "worker", CPUs: cpus, Mems: mems, Written: true},
			Container: id,
			Processes: cgroup.Processes{Listed: 2, Limit: agent.MaxProcessesPerContainer, Processes: []cgroup.Process{
				{PID: 4100, Command: "sshd", CPUs: cpus, Mems: mems},
				{PID: 4242, Command: "lmp", CPUs: cpuset.New(2), Mems: mems, Rank: cgroup.Rank{Variable: "OMPI_COMM_WORLD_RANK", Value: 0}},
			}},
		},
		{
			Pin:       report.Pin{PodUID: "u1", Namespace: "hpc", Pod: "lammps-worker-1", Container: "worker", CPUs: cpuset.New(6, 7), Mems: mems, Written: true},
			Container: cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("b", 64)},
			Err:       fmt.Errorf("container u1: %w", cgroup.ErrVanished),
		},
	}, nil
}

func TestPinsProcessesFromEndpoint(t *testing.T) {
	lister := &fakeLister{}
	srv, err := inspect.New(inspect.Config{
		Gatherer: prometheus.NewRegistry(), Pins: func() inspect.Pins { return inspect.Pins{Source: inspect.SourceAgent} },
		Processes: func(pods []types.NamespacedName) (inspect.Processes, error) {
			return processesView("node-a", lister, pods)
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	code, out, errOut := nodeagent("pins", "--processes", "--endpoint", url, "--pod", "hpc/lammps-worker-0", "--pod", "hpc/lammps-worker-1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got inspect.Processes
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	rank0 := 0
	want := inspect.Processes{Node: "node-a", PerContainer: 1024, PerListing: 4096, Containers: []inspect.ContainerProcesses{
		{Namespace: "hpc", Pod: "lammps-worker-0", PodUID: "u0", Container: "worker", ContainerID: "containerd://" + strings.Repeat("a", 64),
			CPUs: "2-5", Mems: "0", Written: true, Listed: 2, Processes: []inspect.Process{
				{PID: 4100, Command: "sshd", CPUs: "2-5", Mems: "0"},
				{PID: 4242, Command: "lmp", Rank: &rank0, RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "2", Mems: "0"},
			}},
		{Namespace: "hpc", Pod: "lammps-worker-1", PodUID: "u1", Container: "worker", ContainerID: "containerd://" + strings.Repeat("b", 64),
			CPUs: "6-7", Mems: "0", Written: true, Processes: []inspect.Process{}, Error: "container u1: container cgroup vanished"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("processes JSON (-want +got):\n%s", d)
	}
	wantPods := []types.NamespacedName{{Namespace: "hpc", Name: "lammps-worker-0"}, {Namespace: "hpc", Name: "lammps-worker-1"}}
	if d := cmp.Diff(wantPods, lister.asked[0]); d != "" {
		t.Errorf("pods asked (-want +got):\n%s", d)
	}

	code, out, errOut = nodeagent("pins", "--processes", "--endpoint", url)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range []string{
		"Node node-a: processes of 2 pinned containers (the agent reads at most 1024 per container, 4096 in all)",
		"hpc/lammps-worker-0  worker     2-5          4242  0     lmp      2             0",
		"hpc/lammps-worker-1  worker     6-7          -     -     -        -             -             not listed: container u1: container cgroup vanished",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
	if len(lister.asked) != 2 || lister.asked[1] != nil {
		t.Errorf("pods asked without --pod: %v, want none", lister.asked[1:])
	}
}

func TestPinsProcessesErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pins", "--pod", "hpc/w"}, 2, "--pod only applies with --processes"},
		{[]string{"pins", "--processes", "--checkpoint", "f"}, 2, "a checkpoint holds no processes"},
		{[]string{"pins", "--processes", "--pod", "w"}, 2, `pod "w": want namespace/name`},
		{[]string{"pins", "--processes", "--endpoint", "http://127.0.0.1:1"}, 1, "is the node agent running here?"},
	} {
		if code, _, errOut := nodeagent(tt.args...); code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

func TestProcessesViewPassesAgentErrors(t *testing.T) {
	_, err := processesView("n", failingLister{}, nil)
	if err == nil || !strings.Contains(err.Error(), "not rebuilt") {
		t.Errorf("processesView = %v, want the agent's error", err)
	}
}

type failingLister struct{}

func (failingLister) Processes([]types.NamespacedName) ([]agent.PinnedProcesses, error) {
	return nil, errors.New("the agent has not rebuilt its state yet")
}
