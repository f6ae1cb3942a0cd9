package pinning

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/bench/internal/ep"
	"github.com/finegrain-dev/finegrain/bench/internal/result"
	"github.com/finegrain-dev/finegrain/bench/internal/worker"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

// Where the scenarios run, as the Via fields spell it: processes in this bench's own cgroups, or
// pods on a Kubernetes node (package pods).
const (
	ViaCgroups = "cgroups"
	ViaPods    = "pods"
)

// Sample is one run of one benchmark in one scenario.
type Sample struct {
	Via       string     `json:"via"`
	Scenario  string     `json:"scenario"`
	Benchmark string     `json:"benchmark"`
	Repeat    int        `json:"repeat"`
	Run       result.Run `json:"run"`
	// Ranks is the union of the rank cgroups' cpusets, or "floating"; Neighbour the
	// neighbour's cpuset, "floating" or "none".
	Ranks     string              `json:"ranks"`
	Neighbour string              `json:"neighbour"`
	Noise     *worker.NoiseResult `json:"noise,omitempty"`
}

// rankControllers are the hierarchies ranks are moved into. Not cpu: a task in a cpu cgroup of
// its own competes as one group entity against every task of the root cgroup, so on a machine
// that also runs other work (a developer box, not a kubelet node) a pinned rank would lose CPU
// time to that work that a floating rank keeps; leaving the ranks in the root cpu cgroup keeps
// their CPU weight the same in every scenario. The neighbour needs its cpu cgroup for its quota.
var rankControllers = []cgroup.Controller{cgroup.CPUSet, cgroup.Memory}

// bench is what every run shares.
type bench struct {
	o     Options
	topo  *topology.Topology
	tree  *tree
	ranks int
	log   *slog.Logger
	// stderr receives the ranks' and the neighbour's messages.
	stderr io.Writer
}

// Measure runs every benchmark in every scenario o.Repeats times, the scenarios interleaved so
// that slow drifts of the machine's load spread over all of them.
func Measure(ctx context.Context, o Options, stderr io.Writer, log *slog.Logger) (samples []Sample, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the pinning bench creates cgroups and moves processes into them: run it as root")
	}
	topo, err := topology.Discover(o.SysfsRoot)
	if err != nil {
		return nil, err
	}
	mounts, err := cgroup.DetectMounts(o.Mountinfo)
	if err != nil {
		return nil, err
	}
	t, err := newTree(mounts, fmt.Sprintf("finegrain-bench-%d", os.Getpid()), log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, t.close()) }()
	b := &bench{o: o, topo: topo, tree: t, ranks: o.Ranks, log: log, stderr: stderr}
	if b.ranks == 0 {
		b.ranks = DefaultRanks(topo)
	}
	for rep := range o.Repeats {
		for _, sc := range o.Scenarios {
			for _, bm := range o.Benchmarks {
				s, err := b.runOne(ctx, sc, bm)
				if err != nil {
					return samples, fmt.Errorf("scenario %s, %s, repeat %d: %w", sc, bm, rep+1, err)
				}
				s.Repeat = rep
				log.Info("sample", "scenario", sc, "benchmark", bm, "repeat", rep+1, "rate", s.Run.Total.Rate, "unit", s.Run.Unit, "ranOn", s.Run.Total.RanOn)
				samples = append(samples, s)
			}
		}
	}
	return samples, nil
}

// DefaultRanks is one rank per core of the first NUMA node less one, so that every scenario can
// keep all ranks in one node and still leave a core to the shared pool.
func DefaultRanks(topo *topology.Topology) int {
	for _, n := range topo.NUMANodes {
		if len(n.Cores) > 0 {
			return max(len(n.Cores)-1, 1)
		}
	}
	return 1
}

func (b *bench) runOne(ctx context.Context, scenario, benchmark string) (s Sample, err error) {
	l, err := plan(scenario, b.topo, b.ranks)
	if err != nil {
		return Sample{}, err
	}
	mark := len(b.tree.created)
	defer func() { err = errors.Join(err, b.tree.removeSince(mark)) }()
	s = Sample{Via: ViaCgroups, Scenario: scenario, Benchmark: benchmark, Ranks: placement(l.groups != nil, l.ranksCPUs()), Neighbour: "none"}

	var noise *neighbour
	if l.noise {
		s.Neighbour = placement(!l.shared.IsEmpty(), l.shared)
		if noise, err = b.startNeighbour(ctx, l.shared); err != nil {
			return Sample{}, err
		}
		defer func() {
			res, nerr := noise.stop()
			s.Noise, err = res, errors.Join(err, nerr)
		}()
		select {
		case <-time.After(b.o.NoiseWarmup):
		case <-ctx.Done():
			return Sample{}, ctx.Err()
		}
	}

	refs := make([]cgroup.ContainerRef, len(l.groups))
	for i, g := range l.groups {
		if refs[i], err = b.tree.addContainer(cgroup.Guaranteed); err != nil {
			return Sample{}, err
		}
		if err := b.tree.apply(refs[i], cgroup.Resources{CPUs: g.cpus, Mems: l.mems}); err != nil {
			return Sample{}, err
		}
	}
	pl, closeDirs, err := b.placement(l, refs)
	if err != nil {
		return Sample{}, err
	}
	defer closeDirs()
	wo := worker.Options{
		Mode: benchmark, Procs: b.ranks, Output: worker.OutputJSON,
		N: b.o.N, Duration: b.o.Duration, MinReps: 1, ArrayLen: b.o.ArrayLen, NTimes: b.o.NTimes,
		SysfsRoot: b.o.SysfsRoot, ProcRoot: b.o.ProcRoot,
		SampleInterval: 50 * time.Millisecond, ReadyTimeout: 2 * time.Minute,
	}
	if s.Run, err = worker.RunEP(ctx, b.o.Worker, wo, pl, b.stderr, b.log); err != nil {
		return Sample{}, err
	}
	if err := checkPlaced(l, s.Run, b.tree.cloneInto); err != nil {
		return Sample{}, err
	}
	return s, nil
}

// checkPlaced verifies that every pinned rank timed on its group's CPUs and, when it was created
// in its cgroup, that its first instruction already ran there.
func checkPlaced(l layout, run result.Run, createdInCgroup bool) error {
	byRank := map[int]result.Process{}
	for _, p := range run.Processes {
		byRank[p.Rank] = p
	}
	for _, g := range l.groups {
		want := g.cpus.String()
		for _, r := range g.ranks {
			p, ok := byRank[r]
			switch {
			case !ok:
				return fmt.Errorf("rank %d of the group on CPUs %s reported no result", r, want)
			case p.AffinityAtStart != want:
				return fmt.Errorf("rank %d (pid %d) of the group on CPUs %s started timing on CPUs %s: it was not placed before release", r, p.PID, want, p.AffinityAtStart)
			case createdInCgroup && p.AffinityAtInit != want:
				return fmt.Errorf("rank %d (pid %d) was created in the cgroup of CPUs %s but its first instruction could run on CPUs %s", r, p.PID, want, p.AffinityAtInit)
			}
		}
	}
	return nil
}

// EntryMethod says how the ranks and the neighbour enter their cgroups on the host whose mount
// table is mountinfo, for the report.
func EntryMethod(mountinfo string) (string, error) {
	mounts, err := cgroup.DetectMounts(mountinfo)
	if err != nil {
		return "", err
	}
	if cloneIntoCgroup(mounts.Version, kernelRelease()) {
		return "created in their cgroups (clone3 CLONE_INTO_CGROUP, cgroup v2)", nil
	}
	return fmt.Sprintf("moved into their cgroups before the ranks are released (cgroup v%d)", mounts.Version), nil
}

// placement puts each rank of l into the cgroup of its group: created there where the tree can
// (cgroup v2), else moved there before it is released. The returned function closes the cgroup
// directories it opened, once the ranks have started.
func (b *bench) placement(l layout, refs []cgroup.ContainerRef) (worker.Placement, func(), error) {
	if !b.tree.cloneInto {
		return worker.Placement{Place: func(procs []*ep.Proc) error {
			for i, g := range l.groups {
				for _, r := range g.ranks {
					if err := b.tree.attach(refs[i], procs[r].PID, rankControllers...); err != nil {
						return err
					}
				}
			}
			return nil
		}}, func() {}, nil
	}
	var dirs []*os.File
	closeAll := func() {
		for _, d := range dirs {
			_ = d.Close()
		}
	}
	fds := map[int]int{}
	for i, g := range l.groups {
		d, err := b.tree.openDir(refs[i])
		if err != nil {
			closeAll()
			return worker.Placement{}, nil, err
		}
		dirs = append(dirs, d)
		for _, r := range g.ranks {
			fds[r] = int(d.Fd())
		}
	}
	return worker.Placement{CgroupFD: func(rank int) int {
		if fd, ok := fds[rank]; ok {
			return fd
		}
		return -1
	}}, closeAll, nil
}

// placement spells where something runs for the report.
func placement(pinned bool, cpus cpuset.CPUSet) string {
	if !pinned {
		return "floating"
	}
	return cpus.String()
}

// neighbour is a running `fgworker noise`.
type neighbour struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startNeighbour starts the noisy neighbour in its own Burstable pod cgroup with the CPU
// quota of its limit, confined to cpus when that is not empty: created there on cgroup v2, moved
// there at once on v1.
func (b *bench) startNeighbour(ctx context.Context, cpus cpuset.CPUSet) (*neighbour, error) {
	ref, err := b.tree.addContainer(cgroup.Burstable)
	if err != nil {
		return nil, err
	}
	want := cgroup.Resources{CPUs: cpus}
	if b.o.NoiseCPUs > 0 {
		const period = 100000
		want.CPUQuota = cgroup.Quota{QuotaUS: int64(b.o.NoiseCPUs * period), PeriodUS: period}
	}
	if err := b.tree.apply(ref, want); err != nil {
		return nil, err
	}
	n := &neighbour{}
	n.cmd = exec.CommandContext(ctx, b.o.Worker, "noise", "-threads", fmt.Sprint(b.o.NoiseThreads),
		"-mem-mib", fmt.Sprint(b.o.NoiseMiB), "-duration", "0", "-o", "json")
	n.cmd.Stdout, n.cmd.Stderr = &n.out, b.stderr
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if b.tree.cloneInto {
		dir, err := b.tree.openDir(ref)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		n.cmd.SysProcAttr.UseCgroupFD, n.cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the neighbour %s noise: %w", b.o.Worker, err)
	}
	if b.tree.cloneInto {
		return n, nil
	}
	if err := b.tree.attach(ref, n.cmd.Process.Pid, treeControllers...); err != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		return nil, err
	}
	return n, nil
}

// stop ends the neighbour and returns what it reports it did.
func (n *neighbour) stop() (*worker.NoiseResult, error) {
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("stop the neighbour (pid %d): %w", n.cmd.Process.Pid, err)
	}
	if err := n.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("neighbour (pid %d) failed: %w", n.cmd.Process.Pid, err)
	}
	var r worker.NoiseResult
	if err := json.Unmarshal(n.out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("neighbour (pid %d) result %q: %w", n.cmd.Process.Pid, n.out.String(), err)
	}
	return &r, nil
}
