package vm

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// CgroupMode is how the guest's /init mounts cgroups.
type CgroupMode string

const (
	// CgroupV1 mounts one v1 hierarchy per controller under a tmpfs at /sys/fs/cgroup the way
	// systemd does on a legacy host (cpu and cpuacct co-mounted as "cpu,cpuacct" with symlinks),
	// plus an empty cgroup2 at /sys/fs/cgroup/unified.
	CgroupV1 CgroupMode = "v1"
	// CgroupV2 boots with cgroup_no_v1=all, mounts cgroup2 at /sys/fs/cgroup and enables every
	// controller it offers in the root's cgroup.subtree_control, as systemd does.
	CgroupV2 CgroupMode = "v2"
)

// Job is one Go package run inside a guest.
type Job struct {
	// Package is the package path relative to the module root, e.g. "./pkg/topology".
	Package string `json:"package"`
	// Program runs the package's main program (go build) instead of its tests (go test -c).
	Program bool `json:"program,omitempty"`
	// Helper installs the binary at GuestPath without running it, for other jobs to start: a
	// workload program that a benchmark drives, say.
	Helper bool `json:"helper,omitempty"`
	// Args are appended to the binary's command line; tests already get -test.v, -test.count=1
	// and -test.timeout.
	Args []string `json:"args,omitempty"`
}

// Config is one guest of the matrix: the machine qemu builds, how cgroups are mounted, and the
// packages run inside it.
type Config struct {
	// Name identifies the configuration; the guest sees it in FINEGRAIN_VM.
	Name string `json:"name"`
	// About says in a line what the configuration is for.
	About   string     `json:"about"`
	Machine Machine    `json:"machine"`
	Cgroup  CgroupMode `json:"cgroup"`
	Jobs    []Job      `json:"jobs"`
}

var configName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate checks the configuration before anything is built or booted.
func (c Config) Validate() error {
	if !configName.MatchString(c.Name) {
		return fmt.Errorf("configuration name %q: use lower-case letters, digits and dashes", c.Name)
	}
	if c.Cgroup != CgroupV1 && c.Cgroup != CgroupV2 {
		return fmt.Errorf("configuration %s: cgroup mode %q, want %q or %q", c.Name, c.Cgroup, CgroupV1, CgroupV2)
	}
	if err := c.Machine.Validate(); err != nil {
		return fmt.Errorf("configuration %s: %w", c.Name, err)
	}
	runs := false
	for _, j := range c.Jobs {
		if !strings.HasPrefix(j.Package, "./") || strings.Contains(j.Package, "..") {
			return fmt.Errorf("configuration %s: package %q must be a path inside the module starting with ./", c.Name, j.Package)
		}
		if j.Helper && !j.Program {
			return fmt.Errorf("configuration %s: helper %s must be a program", c.Name, j.Package)
		}
		runs = runs || !j.Helper
	}
	if !runs {
		return fmt.Errorf("configuration %s runs no packages", c.Name)
	}
	return nil
}

// kernelArgs is the guest kernel's command line.
func (c Config) kernelArgs() string {
	args := []string{"console=ttyS0", "panic=-1", "quiet", "loglevel=3", "rdinit=/init"}
	if c.Machine.MaxCPUs > 0 {
		args = append(args, fmt.Sprintf("maxcpus=%d", c.Machine.MaxCPUs))
	}
	if c.Cgroup == CgroupV2 {
		args = append(args, "cgroup_no_v1=all", "systemd.unified_cgroup_hierarchy=1")
	}
	return strings.Join(args, " ")
}

// GuestPath is where a job's binary lies inside the guest.
func (j Job) GuestPath() string { return guestBin + "/" + j.binaryName() }

// binaryName is the job's file name under /finegrain/bin: the package path with / turned to _,
// and .test for a test binary or .bin for a program.
func (j Job) binaryName() string {
	name := strings.ReplaceAll(strings.TrimPrefix(j.Package, "./"), "/", "_")
	if j.Program {
		return name + ".bin"
	}
	return name + ".test"
}

// Lookup returns the configuration with the given name, from the standard matrix or the opt-in
// configurations of Extra.
func Lookup(name string) (Config, bool) {
	for _, c := range append(Matrix(), Extra()...) {
		if c.Name == name {
			return c, true
		}
	}
	return Config{}, false
}

// Select returns the configurations named in a comma-separated list, or the whole standard
// matrix for an empty list.
func Select(names string) ([]Config, error) {
	all := Matrix()
	if strings.TrimSpace(names) == "" {
		return all, nil
	}
	var out []Config
	for _, name := range strings.Split(names, ",") {
		c, ok := Lookup(strings.TrimSpace(name))
		if !ok {
			var known []string
			for _, k := range append(all, Extra()...) {
				known = append(known, k.Name)
			}
			return nil, fmt.Errorf("no configuration named %q; known: %s", name, strings.Join(known, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// OnlyPackages keeps, in every configuration, the jobs of the given packages (a comma-separated
// list of ./paths) and drops configurations left without jobs. An empty list keeps everything.
func OnlyPackages(cfgs []Config, pkgs string) ([]Config, error) {
	if strings.TrimSpace(pkgs) == "" {
		return cfgs, nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(pkgs, ",") {
		want[strings.TrimSpace(p)] = true
	}
	var out []Config
	seen := map[string]bool{}
	for _, c := range cfgs {
		var jobs []Job
		for _, j := range c.Jobs {
			if want[j.Package] {
				jobs = append(jobs, j)
				seen[j.Package] = true
			}
		}
		if len(jobs) > 0 {
			c.Jobs = jobs
			out = append(out, c)
		}
	}
	for p := range want {
		if !seen[p] {
			return nil, fmt.Errorf("no selected configuration runs package %q (give paths as ./pkg/name)", p)
		}
	}
	return out, nil
}

// WithTestRun makes every test job of cfgs run only the tests matching regex (its -test.run),
// replacing the job's own selection. An empty regex changes nothing.
func WithTestRun(cfgs []Config, regex string) []Config {
	if regex == "" {
		return cfgs
	}
	out := make([]Config, len(cfgs))
	for i, c := range cfgs {
		jobs := make([]Job, len(c.Jobs))
		for k, j := range c.Jobs {
			if !j.Program {
				j.Args = append(slices.Clone(j.Args), "-test.run", regex)
			}
			jobs[k] = j
		}
		c.Jobs = jobs
		out[i] = c
	}
	return out
}
