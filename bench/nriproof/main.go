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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// mode is the agent's container-creation path.
type mode string

const (
	modeNRI     mode = "nri"
	modeInotify mode = "inotify"
)

type options struct {
	kubeconfig    string
	agentNS       string
	agentName     string
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
	fs := flag.NewFlagSet("nriproof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modes := fs.String("modes", "nri,inotify", "agent paths to measure, in order: nri (pinned at creation) and inotify")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "/var/lib/finegrain-cluster/admin.kubeconfig", "admin kubeconfig of the cluster")
	fs.StringVar(&o.agentNS, "agent-namespace", "finegrain-system", "namespace of the agent's DaemonSet")
	fs.StringVar(&o.agentName, "agent-daemonset", "finegrain-nodeagent", "name of the agent's DaemonSet")
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
	for _, m := range strings.Split(*modes, ",") {
		switch mode(m) {
		case modeNRI, modeInotify:
			o.modes = append(o.modes, mode(m))
		default:
			return o, fmt.Errorf("-modes: unknown mode %q (want nri, inotify)", m)
		}
	}
	if o.pods < 1 {
		return o, fmt.Errorf("-pods %d: want at least 1", o.pods)
	}
	return o, nil
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "nriproof:", err)
		}
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("nriproof failed", "reason", err.Error())
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("nriproof-%d", time.Now().Unix())
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	agent := agentControl{client: client, namespace: o.agentNS, name: o.agentName, endpoint: o.agentEndpoint}
	original, err := agent.args(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if _, err := agent.setArgs(context.Background(), original); err != nil {
			log.Error("cannot restore the agent's arguments", "args", original, "reason", err.Error())
		}
	}()
	r := result{Command: strings.Join(os.Args, " "), Modes: map[mode]modeResult{}}
	for _, m := range o.modes {
		log.Info("rolling the agent out", "mode", string(m))
		pod, err := agent.setArgs(ctx, withMode(original, m))
		if err != nil {
			return err
		}
		if err := agent.waitPath(ctx, m); err != nil {
			return err
		}
		r.Node = pod.Spec.NodeName
		w := workers{client: client, ns: ns, image: o.image, timeout: o.podTimeout, agent: agent, log: log, ctr: o.ctr, containerd: o.containerd}
		since := time.Now()
		samples, err := w.run(ctx, m, o.pods)
		if err == nil {
			err = annotate(ctx, client, pod, since, o.containerdLog, samples)
		}
		r.Modes[m] = summarizeMode(samples)
		if err != nil {
			return err
		}
	}
	if err := writeTable(os.Stdout, r, o.modes); err != nil {
		return err
	}
	if o.jsonOut == "" {
		return nil
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.jsonOut, append(data, '\n'), 0o644)
}
