package vm

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// JobResult is what one job did inside a guest.
type JobResult struct {
	Job Job
	// ExitCode is the binary's exit status, or -1 when it never finished (or, for a helper, never
	// ran).
	ExitCode int
	// Output is everything the binary printed on the console.
	Output string
}

// Attempt is one boot of a configuration.
type Attempt struct {
	// Boot is the time from starting qemu to the guest's /init reaching its jobs; zero when it
	// never got there.
	Boot time.Duration
	// Duration is the time from starting qemu to its exit.
	Duration time.Duration
	// Err says why the guest did not run every job to completion (hang, crash, setup failure);
	// nil when it did, whatever the jobs' exit statuses.
	Err error
	// Console is the whole serial console output.
	Console string
	Jobs    []JobResult
}

// Result is the outcome of one configuration, after at most the runner's number of attempts.
type Result struct {
	Config Config
	// Accel is the accelerator the guest ran under (tcg or kvm).
	Accel    string
	Attempts []Attempt
}

// Last returns the attempt that counts: the final one.
func (r Result) Last() Attempt {
	if len(r.Attempts) == 0 {
		return Attempt{Err: fmt.Errorf("configuration %s was never booted", r.Config.Name)}
	}
	return r.Attempts[len(r.Attempts)-1]
}

// Err is nil when the guest ran every job and every job exited 0.
func (r Result) Err() error {
	last := r.Last()
	if last.Err != nil {
		return fmt.Errorf("configuration %s: %w", r.Config.Name, last.Err)
	}
	var failed []string
	for _, j := range last.Jobs {
		if j.ExitCode != 0 && !j.Job.Helper {
			failed = append(failed, fmt.Sprintf("%s (exit %d)", j.Job.Package, j.ExitCode))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("configuration %s: %s failed", r.Config.Name, strings.Join(failed, ", "))
	}
	return nil
}

// WriteReport prints a table of every configuration's boot and run times and outcome, then the
// console output of every failed job or configuration.
func WriteReport(w io.Writer, results []Result) {
	var total time.Duration
	fmt.Fprintf(w, "%-26s %-5s %8s %8s %8s  %s\n", "configuration", "accel", "boot", "run", "attempts", "result")
	for _, r := range results {
		last := r.Last()
		for _, a := range r.Attempts {
			total += a.Duration
		}
		status := "ok"
		if err := r.Err(); err != nil {
			status = "FAIL: " + err.Error()
		}
		fmt.Fprintf(w, "%-26s %-5s %8s %8s %8d  %s\n", r.Config.Name, r.Accel,
			last.Boot.Round(10*time.Millisecond), last.Duration.Round(10*time.Millisecond), len(r.Attempts), status)
	}
	fmt.Fprintf(w, "total guest time %s\n", total.Round(10*time.Millisecond))
	for _, r := range results {
		if r.Err() == nil {
			continue
		}
		last := r.Last()
		if last.Err != nil {
			fmt.Fprintf(w, "\n=== %s: console of the last attempt\n%s", r.Config.Name, last.Console)
			continue
		}
		for _, j := range last.Jobs {
			if j.ExitCode != 0 && !j.Job.Helper {
				fmt.Fprintf(w, "\n=== %s: %s (exit %d)\n%s", r.Config.Name, j.Job.Package, j.ExitCode, j.Output)
			}
		}
	}
}
