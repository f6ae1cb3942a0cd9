package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Bounds on what a job may ask for, so that a corrupt or hostile answer cannot overflow the
// bridge's arithmetic: far above any real job.
const (
	maxCount      = 1 << 24 // nodes, tasks, CPUs
	maxMemoryMiB  = 1 << 30 // 1 PiB
	maxFieldBytes = 1 << 16 // a string field
)

// squeueAnswer is the part of `squeue --json` (Slurm 22.05, openapi v0.0.38) the bridge reads.
// Numbers Slurm leaves unset are JSON null.
type squeueAnswer struct {
	Errors []struct {
		Error       string `json:"error"`
		Description string `json:"description"`
		ErrorNumber int    `json:"error_number"`
	} `json:"errors"`
	Jobs *[]squeueJob `json:"jobs"`
}

type squeueJob struct {
	JobID          *int64 `json:"job_id"`
	Name           string `json:"name"`
	UserName       string `json:"user_name"`
	Partition      string `json:"partition"`
	JobState       string `json:"job_state"`
	StateReason    string `json:"state_reason"`
	Priority       *int64 `json:"priority"`
	NodeCount      *int64 `json:"node_count"`
	Tasks          *int64 `json:"tasks"`
	CPUs           *int64 `json:"cpus"`
	MinCPUsPerNode *int64 `json:"minimum_cpus_per_node"`
	MemoryPerNode  *int64 `json:"memory_per_node"`
	MemoryPerCPU   *int64 `json:"memory_per_cpu"`
	RequiredNodes  string `json:"required_nodes"`
	Nodes          string `json:"nodes"`
	Comment        string `json:"comment"`
	AdminComment   string `json:"admin_comment"`
	ExitCode       *int64 `json:"exit_code"`
}

// ParseJobs reads the jobs of a `squeue --json` answer. An answer with errors, without a jobs
// list, or with a job whose ID, state or amounts are missing or out of range is an error naming
// the job and the field.
func ParseJobs(data []byte) ([]Job, error) {
	var a squeueAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	if len(a.Errors) > 0 {
		var msgs []string
		for _, e := range a.Errors {
			msgs = append(msgs, fmt.Sprintf("%s (%s, %d)", e.Description, e.Error, e.ErrorNumber))
		}
		return nil, fmt.Errorf("squeue --json answered errors: %s", strings.Join(msgs, "; "))
	}
	if a.Jobs == nil {
		return nil, errors.New("squeue --json: the answer has no jobs list; is this Slurm 22.05's squeue?")
	}
	jobs := make([]Job, 0, len(*a.Jobs))
	for i := range *a.Jobs {
		j, err := (*a.Jobs)[i].job()
		if err != nil {
			return nil, fmt.Errorf("squeue --json: job %d of the answer: %w", i, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// job checks and converts one job.
func (s *squeueJob) job() (Job, error) {
	if s.JobID == nil || *s.JobID <= 0 || *s.JobID > 1<<32-1 {
		return Job{}, errors.New("job_id is missing or not a positive 32-bit number")
	}
	j := Job{ID: JobID(*s.JobID), Name: s.Name, User: s.UserName, Partition: s.Partition, State: State(s.JobState),
		Reason: s.StateReason, RequiredNodes: s.RequiredNodes, NodeList: s.Nodes, Comment: s.Comment, AdminComment: s.AdminComment}
	fail := func(field, want string) error { return fmt.Errorf("job %s: %s %s", j.ID, field, want) }
	if j.State == "" {
		return Job{}, fail("job_state", "is missing")
	}
	for name, v := range map[string]string{"name": s.Name, "user_name": s.UserName, "partition": s.Partition, "job_state": s.JobState,
		"state_reason": s.StateReason, "required_nodes": s.RequiredNodes, "nodes": s.Nodes, "comment": s.Comment, "admin_comment": s.AdminComment} {
		if len(v) > maxFieldBytes {
			return Job{}, fail(name, fmt.Sprintf("is longer than %d bytes", maxFieldBytes))
		}
	}
	if s.Priority != nil {
		if *s.Priority < 0 {
			return Job{}, fail("priority", "is negative")
		}
		j.Priority = *s.Priority
	}
	counts := []struct {
		field string
		from  *int64
		to    *int
	}{{"node_count", s.NodeCount, &j.Nodes}, {"tasks", s.Tasks, &j.Tasks}, {"cpus", s.CPUs, &j.CPUs}, {"minimum_cpus_per_node", s.MinCPUsPerNode, &j.MinCPUsPerNode}}
	for _, c := range counts {
		if c.from == nil {
			continue
		}
		if *c.from < 0 || *c.from > maxCount {
			return Job{}, fail(c.field, fmt.Sprintf("%d is out of range 0..%d", *c.from, maxCount))
		}
		*c.to = int(*c.from)
	}
	for _, m := range []struct {
		field string
		from  *int64
		to    *int64
	}{{"memory_per_node", s.MemoryPerNode, &j.MemoryPerNode}, {"memory_per_cpu", s.MemoryPerCPU, &j.MemoryPerCPU}} {
		if m.from == nil {
			continue
		}
		if *m.from < 0 || *m.from > maxMemoryMiB {
			return Job{}, fail(m.field, fmt.Sprintf("%d MiB is out of range 0..%d", *m.from, maxMemoryMiB))
		}
		*m.to = *m.from * MiB
	}
	if s.ExitCode != nil {
		if *s.ExitCode < 0 || *s.ExitCode > 1<<16 {
			return Job{}, fail("exit_code", "is out of range")
		}
		j.ExitCode = int(*s.ExitCode)
	}
	return j, nil
}
