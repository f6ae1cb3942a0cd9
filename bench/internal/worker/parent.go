package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/finegrain-dev/finegrain/bench/internal/ep"
	"github.com/finegrain-dev/finegrain/bench/internal/result"
)

// Placer acts on the started ranks before they are released, e.g. moves each into a cgroup.
type Placer func(procs []*ep.Proc) error

// Placement says where the ranks of an EP run go before they are released.
type Placement struct {
	// CgroupFD, when set, gives the open cgroup v2 directory each rank is created in, or -1 (see
	// ep.Spec.CgroupFD).
	CgroupFD func(rank int) int
	// Place, when set, acts on the started ranks while they wait.
	Place Placer
}

// ChildArgs are the command-line arguments that make fgworker run rank i of o.
func ChildArgs(o Options, rank int) []string {
	return []string{o.Mode, "-child", "-rank", strconv.Itoa(rank),
		"-n", strconv.Itoa(o.N), "-duration", o.Duration.String(), "-reps", strconv.Itoa(o.MinReps),
		"-array", strconv.Itoa(o.ArrayLen), "-ntimes", strconv.Itoa(o.NTimes),
		"-sysfs", o.SysfsRoot, "-proc", o.ProcRoot, "-sample", o.SampleInterval.String()}
}

// RunEP starts o.Procs ranks of the fgworker binary at path where pl says, lets pl.Place act on
// them while they wait, releases them together and returns their aggregated results.
func RunEP(ctx context.Context, path string, o Options, pl Placement, stderr io.Writer, log *slog.Logger) (result.Run, error) {
	spec := ep.Spec{
		Path: path,
		Args: func(rank int) []string { return ChildArgs(o, rank) },
		// Keep OpenBLAS from starting a thread pool that one rank never uses.
		Env:          []string{"OPENBLAS_NUM_THREADS=1"},
		N:            o.Procs,
		Stderr:       stderr,
		ReadyTimeout: o.ReadyTimeout,
		CgroupFD:     pl.CgroupFD,
	}
	procs, err := ep.Start(ctx, spec)
	if err != nil {
		return result.Run{}, err
	}
	log.Debug("ranks ready", "mode", o.Mode, "processes", len(procs))
	if pl.Place != nil {
		if err := pl.Place(procs); err != nil {
			ep.Kill(procs)
			return result.Run{}, fmt.Errorf("place ranks before release: %w", err)
		}
	}
	if err := ep.Release(procs); err != nil {
		ep.Kill(procs)
		return result.Run{}, err
	}
	outs, err := ep.Collect(procs)
	if err != nil {
		return result.Run{}, err
	}
	ps := make([]result.Process, 0, len(outs))
	for i, out := range outs {
		p, err := result.ParseProcess(out)
		if err != nil {
			return result.Run{}, fmt.Errorf("rank %d: %w", i, err)
		}
		ps = append(ps, p)
	}
	if o.Mode == ModeDGEMM {
		// The ranks' binary may be another build than this one (bench/pinning runs the OpenBLAS
		// fgworker): the backend is what the ranks report.
		return result.Aggregate(result.BenchDGEMM, ranksBackend(ps), result.UnitGFLOPS, ps)
	}
	return result.Aggregate(result.BenchSTREAM, "", result.UnitGBs, ps)
}

// ranksBackend is the BLAS backend the DGEMM ranks report, all of them alike, or a list when
// they differ.
func ranksBackend(ps []result.Process) string {
	var names []string
	for _, p := range ps {
		if p.DGEMM != nil && !slices.Contains(names, p.DGEMM.Backend) {
			names = append(names, p.DGEMM.Backend)
		}
	}
	return strings.Join(names, " / ")
}

// Main runs fgworker as told: one rank, the noise, or an EP run whose result it prints.
func Main(ctx context.Context, o Options, stdin io.Reader, stdout, stderr io.Writer, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	switch {
	case o.Child:
		return RunChild(ctx, o, stdin, stdout, log)
	case o.Mode == ModeNoise:
		return RunNoise(ctx, o, stdout, log)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary to start the ranks: %w", err)
	}
	var pl Placement
	if o.AwaitCPUs > 0 || !o.StartAt.IsZero() {
		pl.Place = releaseWhenPlaced(ctx, o, log)
	}
	run, err := RunEP(ctx, self, o, pl, stderr, log)
	if err != nil {
		return err
	}
	switch o.Output {
	case OutputJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(run)
	case OutputLog:
		return writeLogLine(stdout, run)
	}
	return result.WriteTable(stdout, run)
}
