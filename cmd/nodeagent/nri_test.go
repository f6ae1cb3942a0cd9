package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/kubeletpolicy"
	"github.com/finegrain-dev/finegrain/pkg/agent/nri"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/cgroup/cgrouptest"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

func TestParseNRIFlags(t *testing.T) {
	node := env(map[string]string{"NODE_NAME": "n"})
	o, err := parseRunFlags([]string{"--nri=on", "--nri-socket", "/run/x/nri.sock", "--nri-plugin-index", "42", "--nri-pod-wait", "300ms"}, node)
	if err != nil {
		t.Fatal(err)
	}
	if o.nri.mode != nri.ModeOn || o.nri.plugin.SocketPath != "/run/x/nri.sock" || o.nri.plugin.PluginIndex != "42" || o.nri.plugin.PodWait != 300*time.Millisecond {
		t.Errorf("parsed %+v", o.nri)
	}
	if o, _ := parseRunFlags(nil, node); o.nri.mode != nri.ModeAuto || o.nri.plugin.SocketPath != nri.DefaultSocketPath {
		t.Errorf("defaults %+v", o.nri)
	}
	for _, args := range [][]string{{"--nri=maybe"}, {"--nri-plugin-index=1"}, {"--nri-socket="}} {
		if _, err := parseRunFlags(args, node); err == nil || !strings.Contains(err.Error(), "nri") {
			t.Errorf("parseRunFlags(%q) = %v, want an NRI error", args, err)
		}
	}
}

// TestSelectPath: a present socket turns inotify off and the agent's synchronous decisions on.
func TestSelectPath(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sock := filepath.Join(t.TempDir(), "nri.sock")
	o, err := parseRunFlags([]string{"--nri-socket", sock}, env(map[string]string{"NODE_NAME": "n"}))
	if err != nil {
		t.Fatal(err)
	}
	if use := selectPath(&o, log); use || !o.agent.Inotify || o.agent.SyncDecisions {
		t.Errorf("without a socket: NRI %v, inotify %v, sync %v", use, o.agent.Inotify, o.agent.SyncDecisions)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if use := selectPath(&o, log); !use || o.agent.Inotify || !o.agent.SyncDecisions {
		t.Errorf("with a socket: NRI %v, inotify %v, sync %v", use, o.agent.Inotify, o.agent.SyncDecisions)
	}
}

// TestRunNRIWiring runs the agent core (fakes for the API server and the cgroups) with its NRI
// plugin wired as `nodeagent run` wires it, against the NRI runtime containerd embeds: the
// metrics say which path is on and that the plugin is connected.
func TestRunNRIWiring(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nrilog.Set(discardNRILog{})
	dir := t.TempDir()
	sock := filepath.Join(dir, "nri.sock")
	rt, err := adaptation.New("containerd", "v2.4.2", func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(sock), adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	o, err := parseRunFlags([]string{"--nri-socket", sock}, env(map[string]string{"NODE_NAME": testNodeName}))
	if err != nil {
		t.Fatal(err)
	}
	use := selectPath(&o, log)
	topo, err := topology.Synthetic(topology.Shape{Sockets: 1, NUMAPerSocket: 1, L3PerNUMA: 1, CoresPerL3: 4, ThreadsPerCore: 1, MemoryPerNUMA: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	o.agent.StartupAPITimeout, o.agent.ReconcileInterval = 2*time.Second, 20*time.Millisecond
	a, err := agent.NewFromDeps(o.agent, agent.Deps{Pods: fake.NewClientset().CoreV1().Pods(""), Topology: topo, Writer: cgrouptest.NewRecorder(cgroup.V1),
		Store: &memStore{}, Recorder: record.NewFakeRecorder(10), Log: log,
		KubeletPolicy: func() (kubeletpolicy.Result, error) { return kubeletpolicy.Result{Policy: "none"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := runNRI(ctx, o.nri, use, a, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := errors.Join(<-ran, <-done); err != nil {
			t.Errorf("agent and plugin ended with %v", err)
		}
	}()
	const want = `
# HELP finegrain_nodeagent_nri_connected 1 while the runtime has synchronised the NRI plugin on its current connection.
# TYPE finegrain_nodeagent_nri_connected gauge
finegrain_nodeagent_nri_connected 1
# HELP finegrain_nodeagent_path_enabled 1 for each way the agent learns of new containers on this node (nri: pinned at creation through NRI; inotify; informer; scan), 0 for the others.
# TYPE finegrain_nodeagent_path_enabled gauge
finegrain_nodeagent_path_enabled{path="informer"} 1
finegrain_nodeagent_path_enabled{path="inotify"} 0
finegrain_nodeagent_path_enabled{path="nri"} 1
finegrain_nodeagent_path_enabled{path="scan"} 1
`
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want), "finegrain_nodeagent_nri_connected", "finegrain_nodeagent_path_enabled")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type discardNRILog struct{}

func (discardNRILog) Debugf(context.Context, string, ...any) {}
func (discardNRILog) Infof(context.Context, string, ...any)  {}
func (discardNRILog) Warnf(context.Context, string, ...any)  {}
func (discardNRILog) Errorf(context.Context, string, ...any) {}
