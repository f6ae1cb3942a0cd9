package slurm

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/squeue-22.05.json is what Debian's Slurm 22.05.8 answered here: a job cancelled on
// n2 (2 tasks, --mem=100M, a comment and an admin comment set), and two held jobs (-N2 -n4 --mem-per-cpu=50; -n1 -c2).
func TestParseJobsOfSlurm2205(t *testing.T) {
	data, err := os.ReadFile("testdata/squeue-22.05.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := ParseJobs(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: 1, Name: "wrap", User: "root", Partition: "batch", State: StateCancelled, Reason: "None", Priority: 4294901759, Nodes: 1, Tasks: 2, CPUs: 2,
			MinCPUsPerNode: 1, MemoryPerNode: 100 * MiB, RequiredNodes: "n2", NodeList: "n2", Comment: "finegrain: waiting for 2 CPUs", AdminComment: "adm",
			ExitCode: 15},
		{ID: 2, Name: "wrap", User: "root", Partition: "batch", State: StatePending, Reason: ReasonHeldUser, Nodes: 2, Tasks: 4, CPUs: 4,
			MinCPUsPerNode: 1, MemoryPerCPU: 50 * MiB},
		{ID: 3, Name: "wrap", User: "root", Partition: "batch", State: StatePending, Reason: ReasonHeldUser, Nodes: 1, Tasks: 1, CPUs: 2,
			MinCPUsPerNode: 2},
	}
	if d := cmp.Diff(want, jobs); d != "" {
		t.Fatalf("jobs (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		job                 Job
		held, ended, active bool
		cpusPerNode         int
		memoryOnNode        int64
	}{
		{jobs[0], false, true, false, 2, 100 * MiB},
		{jobs[1], true, false, false, 2, 100 * MiB},
		{jobs[2], true, false, false, 2, 0},
	} {
		j := c.job
		if j.Held() != c.held || j.Ended() != c.ended || j.Active() != c.active || j.CPUsPerNode() != c.cpusPerNode ||
			j.MemoryOnNode(j.CPUsPerNode()) != c.memoryOnNode {
			t.Errorf("job %s: held %v ended %v active %v, %d CPUs and %d bytes a node; want %v %v %v, %d, %d", j.ID,
				j.Held(), j.Ended(), j.Active(), j.CPUsPerNode(), j.MemoryOnNode(j.CPUsPerNode()), c.held, c.ended, c.active, c.cpusPerNode, c.memoryOnNode)
		}
	}
}

func TestParseJobsRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not JSON", `squeue: error: x`, "squeue --json: invalid character"},
		{"errors", `{"errors":[{"error":"x","description":"Unable to contact slurm controller","error_number":5}],"jobs":[]}`,
			"Unable to contact slurm controller (x, 5)"},
		{"no jobs list", `{"errors":[]}`, "no jobs list"},
		{"no job id", `{"jobs":[{"job_state":"PENDING"}]}`, "job 0 of the answer: job_id is missing"},
		{"no state", `{"jobs":[{"job_id":7}]}`, "job 7: job_state is missing"},
		{"negative tasks", `{"jobs":[{"job_id":7,"job_state":"PENDING","tasks":-1}]}`, "job 7: tasks -1 is out of range"},
		{"huge memory", `{"jobs":[{"job_id":7,"job_state":"PENDING","memory_per_node":9223372036854775807}]}`, "job 7: memory_per_node"},
		{"negative priority", `{"jobs":[{"job_id":7,"job_state":"PENDING","priority":-3}]}`, "job 7: priority is negative"},
		{"fractional", `{"jobs":[{"job_id":7.5,"job_state":"PENDING"}]}`, "squeue --json: json: cannot unmarshal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJobs([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseJobs: any input parses or is refused, never panics, and what parses is within the
// bounds the bridge's arithmetic relies on.
func FuzzParseJobs(f *testing.F) {
	data, err := os.ReadFile("testdata/squeue-22.05.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"errors":[],"jobs":[{"job_id":1,"job_state":"RUNNING","node_count":2,"cpus":3,"memory_per_cpu":null}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		jobs, err := ParseJobs(in)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == 0 || j.State == "" || j.Nodes < 0 || j.Nodes > maxCount || j.CPUs < 0 || j.CPUs > maxCount ||
				j.MemoryPerNode < 0 || j.MemoryPerCPU < 0 || j.MemoryPerCPU > maxMemoryMiB*MiB {
				t.Fatalf("parsed out of bounds: %+v", j)
			}
			if n := j.CPUsPerNode(); n < 1 || n > maxCount {
				t.Fatalf("job %s: %d CPUs a node", j.ID, n)
			}
			if m := j.MemoryOnNode(j.CPUsPerNode()); m < 0 {
				t.Fatalf("job %s: memory a node overflowed: %d", j.ID, m)
			}
		}
	})
}

func TestParseJobID(t *testing.T) {
	if id, err := ParseJobID("42"); err != nil || id != 42 {
		t.Fatalf("ParseJobID(42) = %v, %v", id, err)
	}
	for _, s := range []string{"", "0", "-1", "4294967296", "4;2", "42.batch"} {
		if _, err := ParseJobID(s); err == nil {
			t.Errorf("ParseJobID(%q) accepted", s)
		}
	}
}

// recordingRunner records the commands it is asked to run and answers squeue with out.
type recordingRunner struct {
	calls [][]string
	out   []byte
}

func (r *recordingRunner) Run(_ context.Context, args []string) ([]byte, error) {
	r.calls = append(r.calls, slices.Clone(args))
	return r.out, nil
}

func TestClientCommands(t *testing.T) {
	r := &recordingRunner{out: []byte(`{"errors":[],"jobs":[]}`)}
	c := &Client{Runner: r}
	ctx := context.Background()
	if _, err := c.Jobs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, 7, []string{"node-a", "node-b.example"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetComment(ctx, 7, "finegrain: waiting\nfor 2 CPUs"); err != nil {
		t.Fatal(err)
	}
	if err := c.Hold(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := c.RequeueHold(ctx, 7); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"squeue", "--all", "--json"},
		{"scontrol", "update", "JobId=7", "ReqNodeList=node-a,node-b.example"},
		{"scontrol", "release", "7"},
		{"scontrol", "update", "JobId=7", "Comment=finegrain: waiting for 2 CPUs"},
		{"scontrol", "hold", "7"},
		{"scontrol", "update", "JobId=7", "Requeue=1"},
		{"scontrol", "requeuehold", "7"},
	}
	if d := cmp.Diff(want, r.calls); d != "" {
		t.Fatalf("commands (-want +got):\n%s", d)
	}
	for _, bad := range [][]string{nil, {"n[1-2]"}, {"a,b"}, {"-x"}, {"JobId=3"}} {
		if err := c.Start(ctx, 7, bad); err == nil {
			t.Errorf("Start with nodes %q accepted", bad)
		}
	}
}

func TestJobSubmitLuaHoldsEveryJob(t *testing.T) {
	for _, want := range []string{"function slurm_job_submit(", "job_desc.priority = 0", "function slurm_job_modify(", "modify_uid == 0", "ESLURM_ACCESS_DENIED"} {
		if !strings.Contains(JobSubmitLua, want) {
			t.Errorf("job_submit.lua lacks %q", want)
		}
	}
}

// BenchmarkParseJobs parses the captured answer (three jobs) as every pass of the bridge does.
func BenchmarkParseJobs(b *testing.B) {
	data, err := os.ReadFile("testdata/squeue-22.05.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJobs(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestJobOptions(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		admin string
		want  Options
		err   string
	}{
		{"", Options{}, ""},
		{"someone else's note", Options{}, ""},
		{"finegrain", Options{}, ""},
		{"finegrain placement=most-loaded", Options{Placement: "most-loaded"}, ""},
		{"finegrain placement=least-loaded exclusive=false", Options{Placement: "least-loaded", Exclusive: &no}, ""},
		{"finegrain exclusive=true", Options{Exclusive: &yes}, ""},
		{"finegrain placement=packed", Options{}, `has "placement=packed"`},
		{"finegrain exclusive", Options{}, `has "exclusive"`},
	} {
		j := Job{ID: 4, AdminComment: tc.admin}
		if want := strings.HasPrefix(tc.admin, "finegrain"); j.Delegated() != want {
			t.Errorf("%q: delegated %v, want %v", tc.admin, j.Delegated(), want)
		}
		got, err := j.Options()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "Slurm job 4") {
				t.Errorf("%q: error %v, want one naming job 4 and containing %s", tc.admin, err, tc.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.admin, got, err, tc.want)
		}
	}
}
