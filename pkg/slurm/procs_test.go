package slurm

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// proc is a process as a fixture of /proc shows it.
type proc struct {
	pid, ppid, uid int
	comm           string
	state          string // "S" unless set
	args           []string
}

// fakeProcs writes each process's stat, status and cmdline below root, as the kernel shows them
// (no exe link: the reader never follows one).
func fakeProcs(t *testing.T, root string, procs ...proc) {
	t.Helper()
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		state := cmp.Or(p.state, "S")
		stat := fmt.Sprintf("%d (%s) %s %d 1 1 0 -1 4194560", p.pid, p.comm, state, p.ppid)
		status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%s\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%[5]d\t%[5]d\nGid:\t0\t0\t0\t0\n",
			p.comm, state, p.pid, p.ppid, p.uid, p.uid)
		cmdline := ""
		if len(p.args) > 0 {
			cmdline = strings.Join(p.args, "\x00") + "\x00"
		}
		for f, v := range map[string]string{"stat": stat, "status": status, "cmdline": cmdline} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The processes of a slurmd pod: each job's slurmstepds (batch, a step, extern) and everything
// below them belong to the job; slurmd, munged, sshd and their children to none. Posers belong to
// no job, or stay in the job they run in: a title without the slurmstepd name, the name without
// the title, a slurmstepd not run by root, and a slurmstepd of another job started below a job.
// Zombies are left out.
func TestJobProcesses(t *testing.T) {
	root := t.TempDir()
	const user = 1000
	fakeProcs(t, root,
		proc{pid: 1, comm: "entrypoint", args: []string{"entrypoint"}},
		proc{pid: 10, ppid: 1, comm: "slurmd", args: []string{"slurmd", "-D", "-N", "k1"}},
		proc{pid: 11, ppid: 1, comm: "munged", args: []string{"munged", "-F"}},
		proc{pid: 12, ppid: 10, comm: "sleep", args: []string{"sleep", "1"}},
		// Job 7: its batch step, the script as the user, mpirun and a rank; step 0 with a rank.
		proc{pid: 20, ppid: 1, comm: "slurmstepd", args: []string{"slurmstepd: [7.batch]"}},
		proc{pid: 21, ppid: 20, uid: user, comm: "slurm_script", args: []string{"/bin/sh", "/var/spool/slurm/d/job00007/slurm_script"}},
		proc{pid: 22, ppid: 21, uid: user, comm: "mpirun", args: []string{"mpirun", "-np", "2", "hpcc"}},
		proc{pid: 23, ppid: 22, uid: user, comm: "hpcc", args: []string{"hpcc"}},
		proc{pid: 30, ppid: 1, comm: "slurmstepd", args: []string{"slurmstepd: [7.0]", "", "", ""}},
		proc{pid: 31, ppid: 30, uid: user, comm: "hpcc", args: []string{"hpcc"}},
		// Job 8's extern step; a slurmstepd still starting (no title yet) is no job's.
		proc{pid: 40, ppid: 10, comm: "slurmstepd", args: []string{"slurmstepd: [8.extern]"}},
		proc{pid: 44, ppid: 1, comm: "slurmstepd", args: []string{"/usr/sbin/slurmstepd"}},
		// Posers: the title without the name, the name and title as a user; and below job 7, the
		// name and title of job 9 as root.
		proc{pid: 41, ppid: 1, comm: "python3", args: []string{"slurmstepd: [9.batch]"}},
		proc{pid: 42, ppid: 41, comm: "sleep", args: []string{"sleep", "100"}},
		proc{pid: 45, ppid: 1, uid: user, comm: "slurmstepd", args: []string{"slurmstepd: [9.0]"}},
		proc{pid: 46, ppid: 45, uid: user, comm: "sleep", args: []string{"sleep", "100"}},
		proc{pid: 24, ppid: 23, comm: "slurmstepd", args: []string{"slurmstepd: [9.1]"}},
		proc{pid: 25, ppid: 24, comm: "sleep", args: []string{"sleep", "100"}},
		// A zombie of job 7.
		proc{pid: 43, ppid: 20, comm: "sleep", state: "Z"},
	)
	pids := []int{1, 10, 11, 12, 20, 21, 22, 23, 24, 25, 30, 31, 40, 41, 42, 43, 44, 45, 46, 99}
	procs, err := ReadProcesses(root, pids)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != len(pids)-1 {
		t.Fatalf("read %d processes, want %d (99 has exited)", len(procs), len(pids)-1)
	}
	want21 := Process{PID: 21, PPID: 20, Comm: "slurm_script", State: 'S', UID: user, Title: "/bin/sh /var/spool/slurm/d/job00007/slurm_script"}
	if p := procs[slices.IndexFunc(procs, func(p Process) bool { return p.PID == 21 })]; p != want21 {
		t.Errorf("process 21 read as %+v, want %+v", p, want21)
	}
	got := JobProcesses(procs)
	for _, pids := range got {
		slices.Sort(pids)
	}
	want := map[JobID][]int{7: {20, 21, 22, 23, 24, 25, 30, 31}, 8: {40}}
	if d := gocmp.Diff(want, got); d != "" {
		t.Fatalf("jobs' processes (-want +got):\n%s", d)
	}
}

// A process's name may hold spaces and parentheses; its real user ID is the first of status's.
func TestReadProcessesNames(t *testing.T) {
	root := t.TempDir()
	fakeProcs(t, root, proc{pid: 5, ppid: 4, uid: 7, comm: "a) (b c)", args: []string{"x"}})
	procs, err := ReadProcesses(root, []int{5})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Process{PID: 5, PPID: 4, Comm: "a) (b c)", State: 'S', UID: 7, Title: "x"}); len(procs) != 1 || procs[0] != want {
		t.Errorf("read %+v, want %+v", procs, want)
	}
}

// Files that are not the kernel's are refused with the process named.
func TestReadProcessesRefusesGarbage(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"stat without its name's end": {"stat": "5 (x", "status": "Uid:\t0\t0\t0\t0\n"},
		"stat without a parent":       {"stat": "5 (x) S", "status": "Uid:\t0\t0\t0\t0\n"},
		"status without Uid":          {"stat": "5 (x) S 1", "status": "Name:\tx\n"},
		"a user ID not a number":      {"stat": "5 (x) S 1", "status": "Uid:\troot\t0\t0\t0\n"},
	} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "5"), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(root, "5", f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ReadProcesses(root, []int{5}); err == nil || !strings.Contains(err.Error(), "process 5") {
			t.Errorf("%s: error %v, want one naming process 5", name, err)
		}
	}
}

// FuzzReadProcesses: any stat, status and cmdline are read or refused with the process named,
// never a panic, and JobProcesses only assigns a process that root named and titled a slurmstepd.
func FuzzReadProcesses(f *testing.F) {
	f.Add([]byte("20 (slurmstepd) S 1 1 1 0 -1"), []byte("Name:\tslurmstepd\nUid:\t0\t0\t0\t0\n"), []byte("slurmstepd: [7.batch]\x00"))
	f.Add([]byte("20 (a) b)) S 1"), []byte("Uid:\t1000\t1000\t1000\t1000\n"), []byte("x\x00y"))
	f.Add([]byte(")"), []byte("Uid:"), []byte{})
	f.Add([]byte("20 (slurmstepd) Z 1"), []byte("Uid:\t-1\n"), []byte("slurmstepd: [7.0]"))
	f.Fuzz(func(t *testing.T, stat, status, cmdline []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "20")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"stat": stat, "status": status, "cmdline": cmdline} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		procs, err := ReadProcesses(root, []int{20})
		if err != nil {
			if !strings.Contains(err.Error(), "process 20") {
				t.Fatalf("error %v does not name the process", err)
			}
			return
		}
		p := procs[0]
		for id, pids := range JobProcesses(procs) {
			if p.Comm != "slurmstepd" || p.UID != 0 || p.State == 'Z' || !strings.HasPrefix(p.Title, "slurmstepd: ["+id.String()+".") || !slices.Equal(pids, []int{20}) {
				t.Fatalf("process %+v assigned to job %s", p, id)
			}
		}
	})
}

// FuzzJobProcesses: any parent relations (cycles, a process its own parent, parents not listed)
// end, and every process assigned to a job has, in its parent chain, a slurmstepd of that job
// whose own ancestors belong to no job.
func FuzzJobProcesses(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 2, 3, 3, 9})
	f.Add([]byte{1, 2, 2, 1, 3, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each pair of bytes is one process: its parent, and what it is (a slurmstepd of job
		// 1 or 2 by name, title and user, a poser, or any process).
		var procs []Process
		for i := 0; i+1 < len(b) && len(procs) < 64; i += 2 {
			p := Process{PID: len(procs) + 1, PPID: int(b[i]) % 70, Comm: "sh", State: 'S', Title: "sh"}
			switch b[i+1] % 5 {
			case 0, 1:
				p.Comm, p.Title = "slurmstepd", fmt.Sprintf("slurmstepd: [%d.batch]", b[i+1]%5+1)
			case 2:
				p.Comm, p.UID, p.Title = "slurmstepd", 1000, "slurmstepd: [1.0]"
			case 3:
				p.State = 'Z'
			}
			procs = append(procs, p)
		}
		byPID := map[int]Process{}
		for _, p := range procs {
			byPID[p.PID] = p
		}
		for id, pids := range JobProcesses(procs) {
			for _, pid := range pids {
				// The outermost slurmstepd of the chain is the job's; in a cycle (which PIDs
				// reused between reads could show) any of the chain's.
				var top JobID
				inChain := map[JobID]bool{}
				seen := map[int]bool{}
				q, ok := byPID[pid]
				for ; ok && !seen[q.PID]; q, ok = byPID[q.PPID] {
					seen[q.PID] = true
					if j, isStepd := IsStepd(q); isStepd {
						top, inChain[j] = j, true
					}
				}
				cycle := ok
				if (!cycle && top != id) || !inChain[id] || byPID[pid].State == 'Z' {
					t.Fatalf("process %+v assigned to job %s; its chain's outermost slurmstepd is of job %s (a cycle: %t)", byPID[pid], id, top, cycle)
				}
			}
		}
	})
}
