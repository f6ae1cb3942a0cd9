// Command nriproof proves, on a real cluster node whose containerd offers NRI (the local cluster:
// CONTAINERD=2 make cluster-up), that a pinned worker never runs on the wrong CPUs when the node
// agent pins through NRI, and shows the inotify path's unpinned window beside it in the same run.
// For each mode it rolls the agent's DaemonSet out with that path (--nri=on, then --nri=off),
// runs -pods pinned workers one after the other, each running fgworker, whose first
// sched_getaffinity (read in Go's init() of the rank process, before main) is compared with the
// exclusive CPUs the agent gave the container, and whose runtime spec (what runc applied before
// starting it) is compared with the pin too. It also reports the agent's own account of each
// pin (the path and the unpinned window), the NRI hook's time per creation, and containerd's
// CreateContainer time with and without the plugin (from containerd's log). Run it as root on the
// node with an admin kubeconfig; it restores the DaemonSet's arguments at the end.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
)

// mode is the agent's container-creation path.
type mode string

const (
	modeNRI     mode = "nri"
	modeInotify mode = "inotify"
)

type options struct {
	target        agentbench.Target
	agentEndpoint string
	modes         []mode
	pods          int
	image         string
	containerdLog string
	ctr           string
	containerd    string
	podTimeout    time.Duration
	jsonOut       string
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := o.target.FlagSet("nriproof", stderr)
	modes := fs.String("modes", "nri,inotify", "agent paths to measure, in order: nri (pinned at creation) and inotify")
	fs.StringVar(&o.agentEndpoint, "agent-endpoint", "http://127.0.0.1:9720", "the agent's inspection endpoint on this node")
	fs.IntVar(&o.pods, "pods", 100, "pinned workers per mode, one after the other")
	fs.StringVar(&o.image, "image", "localhost/finegrain-worker:dev", "workers' image, holding /usr/local/bin/fgworker; never pulled")
	fs.StringVar(&o.containerdLog, "containerd-log", "/var/lib/finegrain-cluster/logs/containerd.log", "containerd's log, for CreateContainer times (empty skips them)")
	fs.StringVar(&o.ctr, "ctr", "ctr", "containerd's ctr, to read each worker's runtime spec (empty skips it)")
	fs.StringVar(&o.containerd, "containerd-address", "/run/finegrain-cluster/containerd/containerd.sock", "containerd's socket (absolute path)")
	fs.DurationVar(&o.podTimeout, "pod-timeout", 2*time.Minute, "limit for one worker to finish")
	fs.StringVar(&o.jsonOut, "json", "", "also write every sample and summary to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.modes, err = agentbench.ParseModes(*modes, modeNRI, modeInotify); err != nil {
		return o, err
	}
	if o.pods < 1 {
		return o, fmt.Errorf("-pods %d: want at least 1", o.pods)
	}
	return o, nil
}

func main() {
	agentbench.Main("nriproof", parse, run)
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	s, err := agentbench.Open(ctx, o.target, "nriproof", log)
	if err != nil {
		return err
	}
	defer s.Close()
	view := agentView{endpoint: o.agentEndpoint}
	r := result{Command: strings.Join(os.Args, " "), Modes: map[mode]modeResult{}}
	for _, m := range o.modes {
		log.Info("rolling the agent out", "mode", string(m))
		pod, err := s.Agent.SetArgs(ctx, withMode(s.AgentArgs, m))
		if err != nil {
			return err
		}
		if err := view.waitPath(ctx, m); err != nil {
			return err
		}
		r.Node = pod.Spec.NodeName
		w := workers{client: s.Client, ns: s.Namespace, image: o.image, timeout: o.podTimeout, agent: view, log: log, ctr: o.ctr, containerd: o.containerd}
		since := time.Now()
		samples, err := w.run(ctx, m, o.pods)
		if err == nil {
			err = annotate(ctx, s.Client, pod, since, o.containerdLog, samples)
		}
		r.Modes[m] = summarizeMode(samples)
		if err != nil {
			return err
		}
	}
	if err := writeTable(os.Stdout, r, o.modes); err != nil {
		return err
	}
	return agentbench.WriteJSON(o.jsonOut, r)
}
