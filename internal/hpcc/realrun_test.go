package hpcc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRealHPCCAcceptsInput runs Debian's hpcc under Open MPI with 2 ranks on the smallest input
// Size writes (2 tasks of 8 MiB: the floor N) and reads its summary back: HPCC must accept the
// file, use its N and grid, and pass its checks. It takes seconds on an idle 2-core machine.
func TestRealHPCCAcceptsInput(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real HPCC run is skipped")
	}
	hpcc, err1 := exec.LookPath("hpcc")
	mpirun, err2 := exec.LookPath("mpirun")
	if err1 != nil || err2 != nil {
		t.Skip("hpcc or mpirun is not installed (apt-get install -y hpcc openmpi-bin): the real HPCC run is skipped")
	}
	if v, err := exec.Command(mpirun, "--version").CombinedOutput(); err != nil || !strings.Contains(string(v), "Open MPI") {
		t.Skipf("mpirun is not Open MPI's (%q, %v), which Debian's hpcc is built against: the real HPCC run is skipped", strings.TrimSpace(string(v)), err)
	}
	in, err := Size(DefaultSizing(2, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "hpccinf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "-np", "2", hpcc)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mpirun -np 2 hpcc in %s: %v\n%s", dir, err, out)
	}
	t.Logf("hpcc with 2 ranks, %s: %.1f s", in.Note, time.Since(start).Seconds())

	sums, err := ParseFile(filepath.Join(dir, "hpccoutf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := sums[len(sums)-1]
	h, err := s.Headline()
	if err != nil {
		t.Fatal(err)
	}
	if !h.Success {
		t.Errorf("HPCC reports Success=0 for our input; see %s/hpccoutf.txt", dir)
	}
	for key, want := range map[string]int{
		"HPL_N": in.N, "HPL_NB": in.NB, "HPL_nprow": in.Grid.P, "HPL_npcol": in.Grid.Q, "CommWorldProcs": 2,
	} {
		if v, _ := s.Value(key); v != strconv.Itoa(want) {
			t.Errorf("%s=%s, want %d", key, v, want)
		}
	}
	for _, fig := range h.Figures() {
		t.Logf("%-12s %-36s %g %s", fig.Benchmark, fig.Key, fig.Value, fig.Unit)
	}
}
