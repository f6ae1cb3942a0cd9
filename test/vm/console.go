package vm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The guest's /init brackets everything it does with marker lines on the serial console:
//
//	@@fgvm:<nonce>:up             userspace reached, cgroups mounted
//	@@fgvm:<nonce>:begin:<job>    job <job> (index into the configuration's jobs) starts
//	@@fgvm:<nonce>:end:<job>:<rc> job <job> exited with status rc
//	@@fgvm:<nonce>:fail:<what>    guest setup failed; the guest powers off
//	@@fgvm:<nonce>:done           every job ran; the guest powers off
//
// The nonce is fresh for every boot, so a test that prints marker-like text cannot forge one.
// Markers are matched anywhere in a line because firmware escape codes may precede them.

func markerPrefix(nonce string) string { return "@@fgvm:" + nonce }

// markerKind is the event a marker line reports.
type markerKind int

const (
	markUp markerKind = iota + 1
	markBegin
	markEnd
	markFail
	markDone
)

type marker struct {
	kind markerKind
	job  int
	code int
	text string
}

// parseMarker looks for a marker with the given prefix in one console line. It returns the text
// before the marker and the marker; ok is false when the line holds none or a malformed one.
func parseMarker(line, prefix string) (before string, m marker, ok bool) {
	i := strings.Index(line, prefix+":")
	if i < 0 {
		return line, marker{}, false
	}
	before, rest := line[:i], strings.TrimRight(line[i+len(prefix)+1:], "\r\n")
	kind, arg, _ := strings.Cut(rest, ":")
	switch kind {
	case "up":
		return before, marker{kind: markUp}, rest == "up"
	case "done":
		return before, marker{kind: markDone}, rest == "done"
	case "fail":
		return before, marker{kind: markFail, text: arg}, true
	case "begin":
		job, err := strconv.Atoi(arg)
		return before, marker{kind: markBegin, job: job}, err == nil && job >= 0
	case "end":
		j, c, found := strings.Cut(arg, ":")
		job, err1 := strconv.Atoi(j)
		code, err2 := strconv.Atoi(c)
		return before, marker{kind: markEnd, job: job, code: code}, found && err1 == nil && err2 == nil && job >= 0
	}
	return line, marker{}, false
}

// console follows one boot's serial output and sorts it into per-job output.
type console struct {
	prefix  string
	start   time.Time
	jobs    []JobResult
	outs    []strings.Builder
	current int
	// upAfter is the time from qemu's start to the up marker; zero until seen.
	upAfter time.Duration
	done    bool
	failure string
	full    strings.Builder
}

func newConsole(nonce string, jobs []Job, start time.Time) *console {
	c := &console{prefix: markerPrefix(nonce), start: start, current: -1}
	for _, j := range jobs {
		c.jobs = append(c.jobs, JobResult{Job: j, ExitCode: -1})
	}
	c.outs = make([]strings.Builder, len(jobs))
	return c
}

// line takes one line of serial output (without its newline) received at time at.
func (c *console) line(s string, at time.Time) {
	c.full.WriteString(s)
	c.full.WriteByte('\n')
	before, m, ok := parseMarker(s, c.prefix)
	if !ok {
		c.output(s)
		return
	}
	if strings.TrimSpace(before) != "" {
		c.output(before)
	}
	switch m.kind {
	case markUp:
		if c.upAfter == 0 {
			c.upAfter = max(at.Sub(c.start), time.Nanosecond)
		}
	case markBegin:
		if m.job < len(c.jobs) {
			c.current = m.job
		}
	case markEnd:
		if m.job < len(c.jobs) {
			c.jobs[m.job].ExitCode = m.code
		}
		c.current = -1
	case markFail:
		c.failure = m.text
	case markDone:
		c.done = true
	}
}

func (c *console) output(s string) {
	if c.current < 0 {
		return
	}
	c.outs[c.current].WriteString(s)
	c.outs[c.current].WriteByte('\n')
}

// results returns every job's exit status and output so far.
func (c *console) results() []JobResult {
	out := make([]JobResult, len(c.jobs))
	for i, j := range c.jobs {
		j.Output = c.outs[i].String()
		out[i] = j
	}
	return out
}

// err says why the boot did not run every job to completion; nil when it did.
func (c *console) err() error {
	switch {
	case c.failure != "":
		return fmt.Errorf("guest setup failed: %s", c.failure)
	case c.done:
		return nil
	case c.upAfter == 0:
		return fmt.Errorf("guest never reached userspace")
	case c.current >= 0:
		return fmt.Errorf("guest stopped while running %s", c.jobs[c.current].Job.Package)
	}
	return fmt.Errorf("guest stopped before running every job")
}
