package slurm

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeProc writes a process's stat, cmdline and exe link below root, as the kernel shows them.
func fakeProc(t *testing.T, root string, pid, ppid int, exe string, args ...string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	comm := filepath.Base(exe)
	stat := strconv.Itoa(pid) + " (" + comm + ") S " + strconv.Itoa(ppid) + " 1 1 0 -1 4194560"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if exe != "" {
		if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
}

// The processes of a slurmd pod: each job's slurmstepds (batch, a step, extern) and everything
// below them belong to the job; slurmd, munged, sshd and their children to none; a process that
// only calls itself a slurmstepd, and a zombie, to none either.
func TestJobProcesses(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 1, 0, "/usr/local/bin/entrypoint", "entrypoint")
	fakeProc(t, root, 10, 1, "/usr/sbin/slurmd", "slurmd", "-D", "-N", "k1")
	fakeProc(t, root, 11, 1, "/usr/sbin/munged", "munged", "-F")
	fakeProc(t, root, 12, 10, "/usr/bin/sleep", "sleep", "1")
	fakeProc(t, root, 20, 1, "/usr/sbin/slurmstepd-wlm", "slurmstepd: [7.batch]")
	fakeProc(t, root, 21, 20, "/usr/bin/bash", "/bin/sh", "/var/spool/slurm/d/job00007/slurm_script")
	fakeProc(t, root, 22, 21, "/usr/bin/orterun", "mpirun", "-np", "2", "hpcc")
	fakeProc(t, root, 23, 22, "/usr/bin/hpcc", "hpcc")
	fakeProc(t, root, 30, 1, "/usr/sbin/slurmstepd-wlm", "slurmstepd: [7.0]", "", "", "")
	fakeProc(t, root, 31, 30, "/usr/bin/hpcc", "hpcc")
	fakeProc(t, root, 40, 1, "/usr/sbin/slurmstepd", "slurmstepd: [8.extern]")
	fakeProc(t, root, 41, 1, "/usr/bin/python3", "slurmstepd: [9.batch]")
	fakeProc(t, root, 42, 41, "/usr/bin/sleep", "sleep", "100")
	fakeProc(t, root, 43, 20, "", "")
	procs, err := ReadProcesses(root, []int{1, 10, 11, 12, 20, 21, 22, 23, 30, 31, 40, 41, 42, 43, 99})
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 14 {
		t.Fatalf("read %d processes, want 14 (99 has exited)", len(procs))
	}
	if p := procs[slices.IndexFunc(procs, func(p Process) bool { return p.PID == 21 })]; p.PPID != 20 || p.Exe != "/usr/bin/bash" ||
		p.Title != "/bin/sh /var/spool/slurm/d/job00007/slurm_script" {
		t.Errorf("process 21 read as %+v", p)
	}
	got := JobProcesses(procs)
	for _, pids := range got {
		slices.Sort(pids)
	}
	want := map[JobID][]int{7: {20, 21, 22, 23, 30, 31}, 8: {40}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("jobs' processes (-want +got):\n%s", d)
	}
}

func TestReadProcessesRefusesGarbage(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "5", "stat"), []byte("5 (x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProcesses(root, []int{5}); err == nil || !strings.Contains(err.Error(), "process 5") {
		t.Fatalf("error %v, want one naming process 5", err)
	}
}

// FuzzReadProcesses: any stat and cmdline are read or refused with the process named, never a
// panic, and JobProcesses only assigns processes whose title a slurmstepd wrote.
func FuzzReadProcesses(f *testing.F) {
	f.Add([]byte("20 (slurmstepd) S 1 1 1 0 -1"), []byte("slurmstepd: [7.batch]\x00"))
	f.Add([]byte("20 (a) b)) S 1"), []byte("x\x00y"))
	f.Add([]byte(")"), []byte{})
	f.Fuzz(func(t *testing.T, stat, cmdline []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "20")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), stat, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), cmdline, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/usr/sbin/slurmstepd", filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
		procs, err := ReadProcesses(root, []int{20})
		if err != nil {
			if !strings.Contains(err.Error(), "process 20") {
				t.Fatalf("error %v does not name the process", err)
			}
			return
		}
		for id, pids := range JobProcesses(procs) {
			if !strings.HasPrefix(procs[0].Title, "slurmstepd: ["+id.String()+".") || !slices.Equal(pids, []int{20}) {
				t.Fatalf("process %+v assigned to job %s", procs[0], id)
			}
		}
	})
}
