package slurm

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// JobSubmitLua is finegrain's job_submit.lua: it holds every new job (priority 0) and refuses
// anyone but root (the bridge) a release or a node list. A virtual cluster's Slurm runs it with
// JobSubmitPlugins=lua, the script beside slurm.conf as job_submit.lua (the name Slurm's plugin
// reads; the ConfigMap key layout.JobSubmitLuaKey).
//
//go:embed job_submit.lua
var JobSubmitLua string

// SqueueFormat is the SQUEUE_FORMAT2 that makes a plain `squeue` show, beside its usual columns,
// the comment in which the bridge says why a job still waits: Slurm 22.05 lets no one set a held
// job's reason, and its squeue cannot print the admin comment. A virtual cluster's pods set it
// in their environment.
const SqueueFormat = "JobID:.18 ,Partition:.10 ,Name:.10 ,UserName:.9 ,StateCompact:.3 ,TimeUsed:.11 ,NumNodes:.6 ,ReasonList:.20 ,Comment:80"

// Runner runs a Slurm command (args[0] is squeue or scontrol) where that Slurm's controller is
// reachable and returns its standard output; an error carries what it wrote on standard error.
type Runner interface {
	Run(ctx context.Context, args []string) ([]byte, error)
}

// LocalRunner runs Slurm's commands on this host, with Env added to this process's
// environment (SLURM_CONF=... to pick a cluster).
type LocalRunner struct {
	Env []string
}

var _ Runner = LocalRunner{}

// Run implements Runner.
func (r LocalRunner) Run(ctx context.Context, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), r.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Client drives one Slurm controller through its own commands.
type Client struct {
	Runner Runner
}

// nodeName is what the bridge accepts as a Slurm node name: a host name, so that no name can
// turn into a host list expression or another scontrol argument.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,252}[A-Za-z0-9])?$`)

// Jobs lists every job slurmctld knows (all partitions, all users, ended jobs it still keeps).
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.Runner.Run(ctx, []string{"squeue", "--all", "--json"})
	if err != nil {
		return nil, err
	}
	return ParseJobs(out)
}

// Start gives a held job its nodes and releases it: Slurm starts it there at once.
func (c *Client) Start(ctx context.Context, id JobID, nodes []string) error {
	if len(nodes) == 0 {
		return fmt.Errorf("start Slurm job %s: no nodes given", id)
	}
	for _, n := range nodes {
		if !nodeName.MatchString(n) {
			return fmt.Errorf("start Slurm job %s: %q is not a Slurm node name (a host name: letters, digits, '.', '_', '-')", id, n)
		}
	}
	if _, err := c.Runner.Run(ctx, []string{"scontrol", "update", "JobId=" + id.String(), "ReqNodeList=" + strings.Join(nodes, ",")}); err != nil {
		return err
	}
	_, err := c.Runner.Run(ctx, []string{"scontrol", "release", id.String()})
	return err
}

// SetComment writes the job's comment, where the bridge says why the job waits (squeue shows it
// with SqueueFormat); control characters become spaces.
func (c *Client) SetComment(ctx context.Context, id JobID, text string) error {
	text = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, text)
	_, err := c.Runner.Run(ctx, []string{"scontrol", "update", "JobId=" + id.String(), "Comment=" + text})
	return err
}

// Hold holds a pending job (priority 0), so that Slurm does not start it on its own.
func (c *Client) Hold(ctx context.Context, id JobID) error {
	_, err := c.Runner.Run(ctx, []string{"scontrol", "hold", id.String()})
	return err
}

// RequeueHold stops a running job and puts it back in the queue held: its processes end and it
// waits for the bridge to place it again. A virtual cluster's jobs are not requeueable
// (JobRequeue=0, so that Slurm never requeues one on its own), and Slurm refuses to requeue such
// a job ("Requested operation is presently disabled"): the job is made requeueable first.
func (c *Client) RequeueHold(ctx context.Context, id JobID) error {
	if _, err := c.Runner.Run(ctx, []string{"scontrol", "update", "JobId=" + id.String(), "Requeue=1"}); err != nil {
		return err
	}
	_, err := c.Runner.Run(ctx, []string{"scontrol", "requeuehold", id.String()})
	return err
}
