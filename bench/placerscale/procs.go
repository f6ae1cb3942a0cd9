package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Scheduler names of the benchmark's own scheduler processes: neither the cluster's
// kube-scheduler nor a placer deployed in it binds their pods.
const (
	placerName = "placerscale-placer"
	kubeName   = "placerscale-kube-scheduler"
	// placerMetrics is where the placer under test serves /metrics and /debug/pprof.
	placerMetrics = "127.0.0.1:10299"
)

// proc is a process the benchmark started; its output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// start runs bin with args, its output appended to DIR/NAME.log.
func start(dir, name, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s %s %v\n", time.Now().UTC().Format(time.RFC3339), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports an error when the process has ended.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log is %s", p.name, p.err, p.log.Name())
	default:
		return nil
	}
}

// cpu is the CPU time, user and system, the process used; zero until it has exited.
func (p *proc) cpu() time.Duration {
	select {
	case <-p.done:
	default:
		return 0
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

// stop ends the process: SIGTERM, then SIGKILL to its process group after 10 s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	defer p.log.Close()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// startKwok runs kwok managing the fake nodes (those annotated kwokKey=kwokValue): it makes them
// Ready and renews their Leases as kubelets would. With o.kwokPods it also plays the kubelet's
// part for their pods (a bound pod becomes Running: a status write per pod); without, a bound pod
// stays as its scheduler left it, as in the Kubernetes scheduler's own throughput benchmark, and
// kwok only finishes the deletion of pods deleted with a grace period.
func startKwok(o *options) (*proc, error) {
	cfg := filepath.Join(o.outDir, "kwok.yaml")
	// Pod IPs come from a /12 so that thousands of pods never run the pool dry; nothing dials them.
	conf := "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n" +
		"  manageNodesWithAnnotationSelector: " + kwokKey + "=" + kwokValue + "\n" +
		"  cidr: 10.224.0.0/12\n" +
		"  nodeLeaseDurationSeconds: 40\n"
	if !o.kwokPods {
		// A pod Stage of our own replaces kwok's default pod stages (ready, complete, delete).
		conf += "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: placerscale-pod-deleted\n" +
			"spec:\n  resourceRef:\n    apiGroup: v1\n    kind: Pod\n" +
			"  selector:\n    matchExpressions:\n    - key: .metadata.deletionTimestamp\n      operator: Exists\n" +
			"  next:\n    finalizers:\n      empty: true\n    delete: true\n"
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("write kwok's configuration: %w", err)
	}
	return start(o.outDir, "kwok", o.kwok, "--kubeconfig", o.kubeconfig, "--config", cfg)
}

// kubeSchedulerConfig is kube-scheduler's configuration: the default plugins under the
// benchmark's scheduler name, the same API limits as the placer, no leader election.
func kubeSchedulerConfig(o *options) string {
	return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection:\n  kubeconfig: " + o.kubeconfig + "\n" +
		"  qps: " + strconv.FormatFloat(o.qps, 'f', -1, 64) + "\n  burst: " + strconv.Itoa(o.burst) + "\n" +
		"leaderElection:\n  leaderElect: false\n" +
		"profiles:\n- schedulerName: " + kubeName + "\n"
}

func startKubeScheduler(o *options) (*proc, error) {
	cfg := filepath.Join(o.outDir, "kube-scheduler.yaml")
	if err := os.WriteFile(cfg, []byte(kubeSchedulerConfig(o)), 0o644); err != nil {
		return nil, fmt.Errorf("write kube-scheduler's configuration: %w", err)
	}
	return start(o.outDir, "kube-scheduler", o.kubeScheduler, "--config", cfg, "--secure-port", "0", "--v", "1")
}

// placerArgs are the flags of the placer under test: the same API limits as kube-scheduler, no
// leader election (the benchmark runs one), its own scheduler name.
func placerArgs(o *options) []string {
	args := []string{"run", "--kubeconfig", o.kubeconfig, "--leader-elect=false", "--scheduler-name", placerName,
		"--kube-api-qps", strconv.FormatFloat(o.qps, 'f', -1, 64), "--kube-api-burst", strconv.Itoa(o.burst),
		"--metrics-address", placerMetrics, "--profiling", "--log-level", "warn"}
	return append(args, o.placerFlags...)
}

func startPlacer(o *options) (*proc, error) {
	return start(o.outDir, "placer", o.placer, placerArgs(o)...)
}

// startScheduler starts the placer or kube-scheduler.
func startScheduler(o *options, placer bool) (*proc, error) {
	if placer {
		return startPlacer(o)
	}
	return startKubeScheduler(o)
}

// stopAll stops every process, last started first.
func stopAll(procs ...*proc) {
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
}
